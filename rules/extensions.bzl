"""Bzlmod extensions (see MODULE.bazel; untested on Bazel 4, which has no Bzlmod)."""

load("//rules/private:cuda_toolkit.bzl", "cuda_toolkit_repository")

def _cuda_impl(_module_ctx):
    cuda_toolkit_repository(name = "local_cuda")

cuda = module_extension(
    implementation = _cuda_impl,
    doc = "Declares @local_cuda, the CUDA toolkit found on this machine.",
)
