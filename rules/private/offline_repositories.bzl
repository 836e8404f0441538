"""Repositories Bazel 4 would otherwise try to download, generated locally.

Bazel 4.2.3 fetches rules_cc and remote_coverage_tools from the internet on
first use; on offline machines that fails with "Unknown host". These repository
rules write small stand-ins instead, so the same calls work in kcache's own
workspace and in any workspace that uses kcache.
"""

_NATIVE_CC_RULES = [
    "cc_library",
    "cc_binary",
    "cc_test",
    "cc_import",
    "cc_proto_library",
    "fdo_prefetch_hints",
    "fdo_profile",
    "cc_toolchain",
    "cc_toolchain_suite",
    "objc_library",
    "objc_import",
]

def _rules_cc_shim_impl(ctx):
    ctx.file("WORKSPACE", 'workspace(name = "{}")\n'.format(ctx.name))
    ctx.file("BUILD.bazel", "")
    ctx.file("cc/BUILD.bazel", "")
    forwards = ['"""rules_cc stand-in: forwards to the native rules."""\n']
    for rule in _NATIVE_CC_RULES:
        forwards.append("def {0}(**attrs):\n    native.{0}(**attrs)\n".format(rule))
    ctx.file("cc/defs.bzl", "\n".join(forwards))

rules_cc_shim = repository_rule(
    implementation = _rules_cc_shim_impl,
    doc = "A rules_cc whose cc/defs.bzl forwards to Bazel's native C++ rules.",
)

def _coverage_tools_shim_impl(ctx):
    ctx.file("WORKSPACE", 'workspace(name = "{}")\n'.format(ctx.name))
    ctx.file(
        "unsupported.sh",
        "#!/bin/sh\necho 'coverage is not supported in an offline Bazel 4 setup' >&2\nexit 1\n",
        executable = True,
    )
    ctx.file("BUILD.bazel", """\
package(default_visibility = ["//visibility:public"])

sh_binary(name = "coverage_report_generator", srcs = ["unsupported.sh"])

sh_binary(name = "lcov_merger", srcs = ["unsupported.sh"])
""")

coverage_tools_shim = repository_rule(
    implementation = _coverage_tools_shim_impl,
    doc = "remote_coverage_tools stand-in: every *_test depends on it; coverage itself is unsupported.",
)
