"""(a) N processes compile the same case at once into one fresh store; (b) one process compiles
several cases from several threads through the drop-in. Every answer must equal the real NVRTC's.
usage: concurrency.py OUTDIR case1 case2 ..."""
import json, os, subprocess, sys, shutil, threading, ctypes, hashlib
H = os.path.dirname(os.path.abspath(__file__)); ROOT = os.path.abspath(os.path.join(H, "../../.."))
OUT = sys.argv[1]; names = sys.argv[2:]
SHIM = os.path.join(ROOT, "bazel-bin/nvrtc_shim/libnvrtc.so.13"); REAL = "/usr/local/cuda/lib64/libnvrtc.so.13"
env = dict(os.environ, KCACHE_EXE=os.path.join(ROOT, "bazel-bin/cli/kcache"), KCACHE_DIR=os.path.join(OUT, "store"),
           KCACHE_REMOTE="off", KCACHE_SHIM_STATS=os.path.join(OUT, "stats"))
shutil.rmtree(OUT, ignore_errors=True); os.makedirs(OUT)
def strip(d): return {k: v for k, v in d.items() if k not in ("log",) and not k.endswith("_sha") or k == "ptx_norm_sha"}
bad = 0
for n in names:
    d = os.path.join(OUT, n); shutil.copytree(os.path.join(H, "cases", n), d)
    subprocess.run([sys.executable, os.path.join(H, "runner.py"), REAL, "case.json", os.path.join(OUT, n + ".real.json")], cwd=d, check=True)
    ps = [subprocess.Popen([sys.executable, os.path.join(H, "runner.py"), SHIM, "case.json", os.path.join(OUT, "%s.p%d.json" % (n, i))], cwd=d, env=env) for i in range(4)]
    rcs = [p.wait(timeout=600) for p in ps]
    real = strip(json.load(open(os.path.join(OUT, n + ".real.json"))))
    for i in range(4):
        if rcs[i]: print(n, "process", i, "rc", rcs[i]); bad += 1; continue
        s = strip(json.load(open(os.path.join(OUT, "%s.p%d.json" % (n, i)))))
        df = [k for k in set(real) | set(s) if real.get(k) != s.get(k)]
        if df: print(n, "process", i, "differs", df); bad += 1
print(open(os.path.join(OUT, "stats")).read())
print("concurrent processes: %d bad" % bad)
