"""Compile one case with one libnvrtc (by path), dump every answer as JSON.
usage: runner.py LIB CASE.json OUT.json   (cwd = the case's working folder)"""
import ctypes, hashlib, json, sys

lib = ctypes.CDLL(sys.argv[1])
case = json.load(open(sys.argv[2]))
out = {}
P = ctypes.c_void_p
prog = P()
import os
def pname(n):
    if n is None: return None
    if n.startswith("@"):  # CuPy-style: an absolute name in a temporary folder beneath the working folder
        os.makedirs("tmpdir", exist_ok=True); return os.path.join(os.getcwd(), "tmpdir", n[1:]).encode()
    return n.encode()
hn = case.get("headers", {})
names = list(hn.keys())
srcs = [hn[n].encode() for n in names]
Harr = ctypes.c_char_p * max(1, len(names))
r = lib.nvrtcCreateProgram(ctypes.byref(prog), case["src"].encode(),
                           pname(case.get("name", "prog.cu")),
                           len(names), Harr(*srcs) if names else None,
                           Harr(*[n.encode() for n in names]) if names else None)
out["create"] = r
for e in case.get("name_exprs", []):
    out.setdefault("add", []).append(lib.nvrtcAddNameExpression(prog, e.encode()))
opts = [o.encode() for o in case.get("options", [])]
Oarr = ctypes.c_char_p * max(1, len(opts))
out["compile"] = lib.nvrtcCompileProgram(prog, len(opts), Oarr(*opts))
def blob(get_size, get, key):
    sz = ctypes.c_size_t(0)
    rs = getattr(lib, get_size)(prog, ctypes.byref(sz))
    out[key + "_size_rc"] = rs
    out[key + "_size"] = sz.value
    if rs == 0 and sz.value:
        buf = ctypes.create_string_buffer(sz.value)
        rg = getattr(lib, get)(prog, buf)
        out[key + "_rc"] = rg
        b = buf.raw
        out[key + "_sha"] = hashlib.sha256(b).hexdigest()
        return b
    return b""
log = blob("nvrtcGetProgramLogSize", "nvrtcGetProgramLog", "log")
out["log"] = log.decode("latin1")
ptx = blob("nvrtcGetPTXSize", "nvrtcGetPTX", "ptx")
import re
_n = re.sub(rb"(_INTERNAL_|_GLOBAL__N__)[0-9a-f]{8}_\d+_\w+?_cu_[0-9a-f]{8}_\d+", rb"\1X", ptx)
_n = re.sub(rb"_ZN\d+_INTERNAL", b"_ZN_INTERNAL", _n)
out["ptx_norm_sha"] = hashlib.sha256(_n).hexdigest()  # PTX with NVRTC's per-process internal names masked
blob("nvrtcGetCUBINSize", "nvrtcGetCUBIN", "cubin")
blob("nvrtcGetLTOIRSize", "nvrtcGetLTOIR", "ltoir")
blob("nvrtcGetOptiXIRSize", "nvrtcGetOptiXIR", "optix")
low = {}
for e in case.get("name_exprs", []):
    c = ctypes.c_char_p()
    rr = lib.nvrtcGetLoweredName(prog, e.encode(), ctypes.byref(c))
    low[e] = [rr, c.value.decode() if c.value else None]
out["lowered"] = low
out["destroy"] = lib.nvrtcDestroyProgram(ctypes.byref(prog))
json.dump(out, open(sys.argv[3], "w"), indent=1, sort_keys=True)
if len(sys.argv) > 4:
    open(sys.argv[4], "w").write(ptx.decode("latin1"))
