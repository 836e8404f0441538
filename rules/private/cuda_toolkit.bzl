"""Finds the local CUDA toolkit and exposes it as a repository.

Search order: $CUDA_PATH, then the folder above `nvcc` on $PATH, then
/usr/local/cuda. The generated repository holds:
  //:cuda_headers   cuda.h and friends (the runtime only needs the types)
  //:nvrtc_headers  nvrtc.h (the precompiler dlopens libnvrtc itself)
  //:toolkit.bzl    CUDA_PATH and CUDA_VERSION as Starlark constants
"""

def _version_from_cuda_h(ctx, cuda_h):
    # cuda.h: "#define CUDA_VERSION 13000" -> "13.0"
    for line in ctx.read(cuda_h).splitlines():
        parts = [p for p in line.replace("\t", " ").split(" ") if p]
        if len(parts) == 3 and parts[0] == "#define" and parts[1] == "CUDA_VERSION":
            number = int(parts[2])
            return "{}.{}".format(number // 1000, (number % 1000) // 10)
    return None

def _find_toolkit(ctx):
    """Returns (path or None, list of places looked at with why they failed)."""
    looked = []
    candidates = []
    cuda_path = ctx.os.environ.get("CUDA_PATH", "")
    if cuda_path:
        candidates.append(("$CUDA_PATH", cuda_path))
    else:
        looked.append("$CUDA_PATH (not set)")
    nvcc = ctx.which("nvcc")
    if nvcc:
        candidates.append(("nvcc on $PATH", str(nvcc.dirname.dirname)))
    else:
        looked.append("nvcc on $PATH (not found)")
    candidates.append(("default", "/usr/local/cuda"))
    for origin, path in candidates:
        if ctx.path(path + "/include/cuda.h").exists:
            return path, looked
        looked.append("{} = {} (no include/cuda.h)".format(origin, path))
    return None, looked

def _cuda_toolkit_repository_impl(ctx):
    path, looked = _find_toolkit(ctx)
    if not path:
        fail("kcache: no CUDA toolkit found. Looked at:\n  " + "\n  ".join(looked) +
             "\nInstall the CUDA toolkit or set CUDA_PATH to its folder (the one holding include/cuda.h).")
    path = str(ctx.path(path).realpath)
    version = _version_from_cuda_h(ctx, path + "/include/cuda.h")
    if not version:
        fail("kcache: could not read CUDA_VERSION from {}/include/cuda.h; is this a CUDA toolkit?".format(path))
    ctx.symlink(path + "/include", "include")
    ctx.file("WORKSPACE", 'workspace(name = "{}")\n'.format(ctx.name))
    ctx.file("toolkit.bzl", 'CUDA_PATH = "{}"\nCUDA_VERSION = "{}"\n'.format(path, version))
    ctx.file("BUILD.bazel", """\
package(default_visibility = ["//visibility:public"])

exports_files(["toolkit.bzl"])

# Driver API types and typedefs (cuda.h, cudaTypedefs.h). No library: the
# runtime opens libcuda.so.1 with dlopen.
cc_library(
    name = "cuda_headers",
    hdrs = glob(["include/*.h", "include/crt/*.h", "include/crt/*.hpp"]),
    includes = ["include"],
)

cc_library(
    name = "nvrtc_headers",
    hdrs = ["include/nvrtc.h"],
    includes = ["include"],
)
""")

cuda_toolkit_repository = repository_rule(
    implementation = _cuda_toolkit_repository_impl,
    environ = ["CUDA_PATH", "PATH"],
    local = True,
    doc = "The local CUDA toolkit: $CUDA_PATH, else nvcc on $PATH, else /usr/local/cuda.",
)
