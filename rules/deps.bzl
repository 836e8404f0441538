"""Workspace setup for kcache: call kcache_dependencies() from your WORKSPACE."""

load("//rules/private:offline_repositories.bzl", "coverage_tools_shim", "rules_cc_shim")
load("//rules/private:cuda_toolkit.bzl", "cuda_toolkit_repository")
load("//rules/private:kcache_tool.bzl", "kcache_tool_repository")

def _maybe(rule, name, **kwargs):
    if not native.existing_rule(name):
        rule(name = name, **kwargs)

def _absolute(label):
    # "//cli:x" from kcache's own workspace means that workspace, written so
    # from another repository.
    text = str(label)
    return "@" + text if text.startswith("//") else text

def kcache_dependencies(kcache_tool = "auto"):
    """Declares every repository kcache needs, skipping those already declared.

    Args:
      kcache_tool: the `kcache` binary cuda_kernel runs. "auto": the `kcache`
        on PATH if there is one, else built from source; "source": built from
        source; or the absolute path of an installed kcache. Building it from
        source costs a fresh output base about as much as a few kernels
        (docs/PERFORMANCE.md, "First build").

    - `local_cuda`: the CUDA toolkit found on this machine (CUDA_PATH, then nvcc
      on PATH, then /usr/local/cuda).
    - `rules_cc`, `remote_coverage_tools`: offline stand-ins (Bazel 4 would
      download them).
    - `rules_java`: Debian's copy (bazel-rules-java).
    - `bazel_skylib`: Debian's copy (bazel-skylib).
    - `kcache_tool`: the `kcache` binary the rules run (see kcache_tool).
    """
    _maybe(
        kcache_tool_repository,
        name = "kcache_tool",
        tool = kcache_tool,
        source = _absolute(Label("//cli:kcache_tool")),
    )
    _maybe(cuda_toolkit_repository, name = "local_cuda")
    _maybe(rules_cc_shim, name = "rules_cc")
    _maybe(coverage_tools_shim, name = "remote_coverage_tools")
    _maybe(native.local_repository, name = "rules_java", path = "/usr/share/bazel/rules/java")
    _maybe(native.local_repository, name = "bazel_skylib", path = "/usr/share/bazel/tools/skylib")

def kcache_dev_dependencies():
    """Repositories and toolchains needed only to build and test kcache itself."""
    # skylib's analysistest runs through these (tests/rules/).
    native.register_toolchains("@bazel_skylib//toolchains/unittest:all")
    _maybe(
        native.new_local_repository,
        name = "googletest",
        path = "/usr/src/googletest",
        build_file = "@kcache//third_party:googletest.BUILD",
    )
