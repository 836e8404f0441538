"""Workspace setup for kcache: call kcache_dependencies() from your WORKSPACE."""

load("//rules/private:offline_repositories.bzl", "coverage_tools_shim", "rules_cc_shim")
load("//rules/private:cuda_toolkit.bzl", "cuda_toolkit_repository")

def _maybe(rule, name, **kwargs):
    if not native.existing_rule(name):
        rule(name = name, **kwargs)

def kcache_dependencies():
    """Declares every repository kcache needs, skipping those already declared.

    - `local_cuda`: the CUDA toolkit found on this machine (CUDA_PATH, then nvcc
      on PATH, then /usr/local/cuda).
    - `rules_cc`, `remote_coverage_tools`: offline stand-ins (Bazel 4 would
      download them).
    - `rules_java`: Debian's copy (bazel-rules-java).
    - `bazel_skylib`: Debian's copy (bazel-skylib).
    """
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
