"""The arch grammar of cuda_kernel and its build settings, checked at analysis.

    real arch    ::= "sm_" digits [ "a" | "f" ]    a cubin, e.g. sm_80, sm_90a, sm_100f
    virtual arch ::= "compute_" digits [ "a" | "f" ]   PTX, e.g. compute_90

`a` builds for exactly that arch (arch-specific instructions such as wgmma);
`f` for its family (CUDA 12.9+). Which archs exist depends on the toolkit: the
valid ones are those `nvcc --list-gpu-code` prints for it (REAL_ARCHS in the
generated @local_cuda//:toolkit.bzl), plus their `a`/`f` variants.
"""

load("@local_cuda//:toolkit.bzl", "CUDA_VERSION", "REAL_ARCHS", "VIRTUAL_ARCHS")

def _arch_order(arch):
    # "sm_100a" -> (100, "a"): numerically, so sm_100 comes after sm_90.
    digits = "".join([c for c in arch.elems() if c.isdigit()])
    return (int(digits) if digits else 0, arch[-1] if not arch[-1].isdigit() else "")

def _suggestion(typed, valid):
    """' (did you mean "sm_90"?)' for a near miss in `valid`, else "".

    As common/arch.h's suggest_arch: lower case, and the separator after
    "sm"/"compute" and any "_", "-", "." or space among the digits dropped.
    """
    lower = typed.lower()
    for prefix in ["sm", "compute"]:
        if lower.startswith(prefix):
            rest = "".join([c for c in lower[len(prefix):].elems() if c not in "_-. "])
            meant = prefix + "_" + rest
            if meant != typed and meant in valid:
                return " (did you mean \"{}\"?)".format(meant)
    return ""

def _valid_list(archs):
    return ", ".join(sorted(archs, key = _arch_order))

def validate_archs(label, archs):
    """Fails, listing the valid archs, if any entry is not a real arch of this toolkit."""
    seen = {}
    for arch in archs:
        if arch in seen:
            fail("cuda_kernel {}: arch \"{}\" is listed twice".format(label, arch))
        seen[arch] = True
        if arch in REAL_ARCHS:
            continue
        hint = _suggestion(arch, REAL_ARCHS)
        if arch.startswith("compute_"):
            hint = " (\"{}\" is a virtual arch: put it in ptx, not archs)".format(arch)
        fail("cuda_kernel {}: unknown arch \"{}\"{}. Valid archs for CUDA {}: {}".format(
            label,
            arch,
            hint,
            CUDA_VERSION,
            _valid_list(REAL_ARCHS),
        ))

def validate_ptx(label, ptx):
    """Fails, listing the valid virtual archs, unless `ptx` is empty or one of them."""
    if not ptx or ptx in VIRTUAL_ARCHS:
        return
    hint = _suggestion(ptx, VIRTUAL_ARCHS)
    if ptx.startswith("sm_"):
        hint = " (\"{}\" is a real arch: put it in archs; ptx takes compute_XY)".format(ptx)
    fail("cuda_kernel {}: unknown ptx arch \"{}\"{}. Valid virtual archs for CUDA {}: {}, or \"none\"".format(
        label,
        ptx,
        hint,
        CUDA_VERSION,
        _valid_list(VIRTUAL_ARCHS),
    ))
