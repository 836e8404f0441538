"""Differential driver: real NVRTC vs kcache's drop-in, per case:
 real (case dir) | shim miss (fresh process) | shim hit (fresh process) | shim from another folder (copy)
 | for cases with "mutate": edit the files, real vs shim again (must not be stale), restore.
usage: run.py [case ...]   env: KC_ROOT (worktree), RK_OUT (work folder)"""
import json, os, shutil, subprocess, sys, concurrent.futures as cf
H = os.path.dirname(os.path.abspath(__file__))
ROOT = os.environ.get("KC_ROOT", os.path.abspath(os.path.join(H, "../../..")))
OUT = os.environ.get("RK_OUT", "/tmp/rk_out")
REAL = "/usr/local/cuda/lib64/libnvrtc.so.13"
SHIM = os.path.join(ROOT, "bazel-bin/nvrtc_shim/libnvrtc.so.13")
EXE = os.path.join(ROOT, "bazel-bin/cli/kcache")
STORE = os.path.join(OUT, "store")

def run(lib, casedir, casejson, tag, name, stats=None):
    o = os.path.join(OUT, "res", name + "." + tag + ".json")
    env = dict(os.environ, KCACHE_EXE=EXE, KCACHE_DIR=STORE, KCACHE_REMOTE="off")
    if stats: env["KCACHE_SHIM_STATS"] = stats
    p = subprocess.run([sys.executable, os.path.join(H, "runner.py"), lib, casejson, o], cwd=casedir,
                       env=env, capture_output=True, text=True, timeout=900)
    if p.returncode != 0:
        return {"crash": p.returncode, "stderr": p.stderr[-2000:]}
    return json.load(open(o))

def diff(a, b):
    keys = sorted(set(a) | set(b))
    return [k for k in keys if a.get(k) != b.get(k)]

def one(name):
    src = os.path.join(H, "cases", name)
    d = os.path.join(OUT, "w1", name); shutil.rmtree(d, ignore_errors=True); shutil.copytree(src, d)
    d2 = os.path.join(OUT, "w2-other-folder", "x" + name); shutil.rmtree(d2, ignore_errors=True); shutil.copytree(src, d2)
    cj = os.path.join(d, "case.json"); case = json.load(open(cj))
    st = os.path.join(OUT, "stats", name); os.makedirs(os.path.dirname(st), exist_ok=True)
    if os.path.exists(st): os.remove(st)
    rep = {"case": name, "findings": []}
    real = run(REAL, d, cj, "real", name)
    real2 = run(REAL, d, cj, "real2", name)
    nd = [k for k in diff(real, real2)]
    if nd:  # the real NVRTC itself differs run to run (internal-linkage names carry a per-process number)
        rep["real_nondeterministic"] = nd
        for x in (real,): x.update({k: "NONDET" for k in nd})
    rep["real_compile"] = real.get("compile"); rep["cubin_size"] = real.get("cubin_size")
    for tag, dd in (("miss", d), ("hit", d), ("other", d2)):
        s = run(SHIM, dd, os.path.join(dd, "case.json"), tag, name, st)
        r = real if dd == d else run(REAL, d2, os.path.join(d2, "case.json"), "real_other", name)
        if nd: s = dict(s, **{k: "NONDET" for k in nd if k in s})
        if nd and r is not real: r = dict(r, **{k: "NONDET" for k in nd if k in r})
        df = diff(r, s)
        if df: rep["findings"].append({"step": tag, "differs": df, "real": {k: r.get(k) for k in df}, "shim": {k: s.get(k) for k in df}})
    for i, (path, text) in enumerate(case.get("mutate") or []):
        f = os.path.join(d, path)
        if text is None: os.remove(f)
        else: open(f, "w").write(text)
        r = run(REAL, d, cj, "real_mut%d" % i, name)
        for tag in ("mut%d_a" % i, "mut%d_b" % i):
            s = run(SHIM, d, cj, tag, name, st)
            if nd: s = dict(s, **{k: "NONDET" for k in nd if k in s}); r = dict(r, **{k: "NONDET" for k in nd if k in r})
            df = diff(r, s)
            if df: rep["findings"].append({"step": tag, "differs": df, "real": {k: r.get(k) for k in df}, "shim": {k: s.get(k) for k in df}})
    rep["stats"] = open(st).read().splitlines() if os.path.exists(st) else []
    return rep

if __name__ == "__main__":
    os.makedirs(os.path.join(OUT, "res"), exist_ok=True)
    names = sys.argv[1:] or sorted(os.listdir(os.path.join(H, "cases")))
    reps = []
    with cf.ThreadPoolExecutor(int(os.environ.get("RK_JOBS", "2"))) as ex:
        for rep in ex.map(one, names):
            reps.append(rep)
            print("%-28s nondet=%s real=%s cubin=%s findings=%d stats=%s" % (rep["case"], rep.get("real_nondeterministic"), rep["real_compile"], rep["cubin_size"],
                  len(rep["findings"]), [l[:90] for l in rep["stats"]]), flush=True)
            for f in rep["findings"]: print("   FINDING", json.dumps(f)[:1500], flush=True)
    json.dump(reps, open(os.path.join(OUT, "report.json"), "w"), indent=1)
