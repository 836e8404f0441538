#!/usr/bin/env python3
"""The persistent worker (kcache compile --persistent_worker) against one
kcache process per compile, in the same run, interleaved:

  hit:   per-request time of a store hit in the worker vs a `kcache compile`
         process hitting the same store (what Bazel pays per action)
  rss:   the worker's RSS (and its NVRTC children's) over many miss requests
         of small kernels (each one different: --no-store), sampled as it goes

  bench/worker_bench.py KCACHE_BINARY [HITS=200] [MISSES=2000]
"""
import os, subprocess, sys, tempfile, time

def varint(n):
    out = b''
    while n >= 0x80:
        out += bytes([(n & 0x7f) | 0x80]); n >>= 7
    return out + bytes([n])

def request(args, rid):
    body = b''
    for a in args:
        a = a.encode(); body += b'\x0a' + varint(len(a)) + a
    body += b'\x18' + varint(rid)
    return varint(len(body)) + body

def read_varint(f):
    n = shift = 0
    while True:
        b = f.read(1)
        if not b: raise EOFError
        n |= (b[0] & 0x7f) << shift; shift += 7
        if not b[0] & 0x80: return n

def exit_code(msg):  # field 1 (varint), written first when not 0
    return msg[1] if msg[:1] == b'\x08' else 0

def rss_kb(pid):
    try:
        with open(f'/proc/{pid}/status') as f:
            for line in f:
                if line.startswith('VmRSS:'): return int(line.split()[1])
    except OSError: pass
    return 0

def children(pid):
    out = []
    for t in os.listdir(f'/proc/{pid}/task'):
        with open(f'/proc/{pid}/task/{t}/children') as f:
            out += [int(c) for c in f.read().split()]
    return out

def main():
    kcache = os.path.abspath(sys.argv[1])
    hits = int(sys.argv[2]) if len(sys.argv) > 2 else 200
    misses = int(sys.argv[3]) if len(sys.argv) > 3 else 2000
    work = tempfile.mkdtemp(prefix='kcache-worker-bench.')
    store = os.path.join(work, 'store')
    src = os.path.join(work, 'k.cu')
    with open(src, 'w') as f:
        f.write('extern "C" __global__ void k(float* p) { *p *= 2.f; }\n')
    env = dict(os.environ, KCACHE_DIR=store)
    w = subprocess.Popen([kcache, 'compile', '--persistent_worker'], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, env=env)
    rid = [0]
    def call(args):
        rid[0] += 1
        w.stdin.write(request(args, rid[0])); w.stdin.flush()
        return w.stdout.read(read_varint(w.stdout))
    hit_args = [src, '--arch', 'sm_90', '-o', os.path.join(work, 'k.kcb')]
    assert exit_code(call(hit_args)) == 0  # the miss that fills the store
    worker_s, cli_s = [], []
    for _ in range(hits):  # interleaved
        t = time.perf_counter(); assert exit_code(call(hit_args)) == 0
        worker_s.append(time.perf_counter() - t)
        t = time.perf_counter()
        subprocess.run([kcache, 'compile'] + hit_args, env=env, check=True)
        cli_s.append(time.perf_counter() - t)
    med = lambda xs: sorted(xs)[len(xs) // 2] * 1000
    print(f'hit, median of {hits}: worker request {med(worker_s):.2f} ms, '
          f'CLI process {med(cli_s):.2f} ms, ratio {med(cli_s) / med(worker_s):.1f}x')

    samples = []
    t0 = time.time()
    for i in range(misses):
        with open(src, 'w') as f:
            f.write(f'extern "C" __global__ void k(float* p) {{ *p *= {i}.f; }}\n')
        code = exit_code(call(['--no-store', src, '--arch', 'sm_80,sm_90', '--ptx', 'compute_90',
                               '-o', os.path.join(work, 'k.kcb')]))
        assert code == 0, code
        if i % max(1, misses // 10) == 0 or i == misses - 1:
            kids = children(w.pid)
            samples.append((i + 1, rss_kb(w.pid), sum(rss_kb(c) for c in kids), len(kids)))
    print(f'{misses} miss requests (3 targets each) in {time.time() - t0:.0f} s')
    print('| requests | worker RSS | children RSS (sum) | children |')
    print('|---|---|---|---|')
    for n, r, c, k in samples:
        print(f'| {n} | {r / 1024:.0f} MiB | {c / 1024:.0f} MiB | {k} |')
    w.stdin.close()
    print('worker exit status', w.wait())

if __name__ == '__main__':
    main()
