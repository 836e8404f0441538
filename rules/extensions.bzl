"""Bzlmod extensions (see MODULE.bazel; untested on Bazel 4, which has no Bzlmod)."""

load("//rules/private:cuda_toolkit.bzl", "cuda_toolkit_repository")
load("//rules/private:kcache_tool.bzl", "kcache_tool_repository")

def _cuda_impl(_module_ctx):
    cuda_toolkit_repository(name = "local_cuda")

    # The kcache the rules run (rules/BUILD.bazel, kcache_tool): as
    # kcache_dependencies() does, the one on PATH, else built from source.
    source = str(Label("//cli:kcache_tool"))
    kcache_tool_repository(
        name = "kcache_tool",
        tool = "auto",
        source = "@" + source if source.startswith("//") else source,
    )

cuda = module_extension(
    implementation = _cuda_impl,
    doc = "Declares @local_cuda, the CUDA toolkit found on this machine, and @kcache_tool.",
)
