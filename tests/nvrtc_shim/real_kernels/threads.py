"""One process, several threads, each compiling a different case through the drop-in (twice: miss
then hit), compared with the real NVRTC's answers from run.py's results (RK_OUT/res/<case>.real.json).
usage: threads.py RK_OUT case1 case2 ...   (env: KCACHE_*; run.py must have run first)"""
import ctypes, hashlib, json, os, sys, threading, re
OUT = sys.argv[1]; names = sys.argv[2:]
H = os.path.dirname(os.path.abspath(__file__)); ROOT = os.path.abspath(os.path.join(H, "../../.."))
lib = ctypes.CDLL(os.path.join(ROOT, "bazel-bin/nvrtc_shim/libnvrtc.so.13"))
def compile_case(n):
    case = json.load(open(os.path.join(OUT, "w1", n, "case.json")))
    name = os.path.join(OUT, "w1", n, "tmpdir", case["name"][1:]) if case["name"].startswith("@") else case["name"]
    hn = case["headers"]; ks = list(hn)
    A = ctypes.c_char_p * max(1, len(ks)); prog = ctypes.c_void_p()
    assert lib.nvrtcCreateProgram(ctypes.byref(prog), case["src"].encode(), name.encode(), len(ks),
                                  A(*[hn[k].encode() for k in ks]), A(*[k.encode() for k in ks])) == 0
    for e in case["name_exprs"]: lib.nvrtcAddNameExpression(prog, e.encode())
    o = [x.encode() for x in case["options"]]; O = ctypes.c_char_p * max(1, len(o))
    r = {"compile": lib.nvrtcCompileProgram(prog, len(o), O(*o))}
    for k, gs, g in (("ptx", "nvrtcGetPTXSize", "nvrtcGetPTX"), ("cubin", "nvrtcGetCUBINSize", "nvrtcGetCUBIN")):
        sz = ctypes.c_size_t(); getattr(lib, gs)(prog, ctypes.byref(sz)); r[k + "_size"] = sz.value
        if sz.value:
            b = ctypes.create_string_buffer(sz.value); getattr(lib, g)(prog, b)
            if k == "ptx":
                nb = re.sub(rb"(_INTERNAL_|_GLOBAL__N__)[0-9a-f]{8}_\d+_\w+?_cu_[0-9a-f]{8}_\d+", rb"\1X", b.raw)
                r["ptx_norm_sha"] = hashlib.sha256(re.sub(rb"_ZN\d+_INTERNAL", b"_ZN_INTERNAL", nb)).hexdigest()
    lib.nvrtcDestroyProgram(ctypes.byref(prog)); return r
bad = []
def work(n):
    real = json.load(open(os.path.join(OUT, "res", n + ".real.json")))
    for rnd in range(2):
        r = compile_case(n)
        df = [k for k in r if r[k] != real.get(k)]
        if df: bad.append((n, rnd, df))
ts = [threading.Thread(target=work, args=(n,)) for n in names]
[t.start() for t in ts]; [t.join(timeout=600) for t in ts]
print("hung:", [n for n, t in zip(names, ts) if t.is_alive()], "bad:", bad)
