"""The `kcache` binary cuda_kernel runs: an installed one, or built from source.

kcache_dependencies(kcache_tool = ...) declares the repository @kcache_tool
with one target, //:kcache, that rules/BUILD.bazel's `kcache_tool` setting
points at:
  "auto"    (default) the `kcache` on the PATH Bazel was started with, if there
            is one, else built from source (@kcache//cli:kcache_tool)
  "source"  always built from source
  "/abs/path/to/kcache"  that binary (it must exist)
An installed kcache saves a fresh output base building the tool (see
docs/PERFORMANCE.md, "First build"); it should be the release these rules came
with. `--@kcache//rules:kcache_tool=LABEL` still overrides all of this.
"""

def _kcache_tool_repository_impl(ctx):
    choice = ctx.attr.tool
    path = None
    if choice == "auto":
        found = ctx.which("kcache")
        path = str(found) if found else None
    elif choice != "source":
        if not choice.startswith("/"):
            fail(("kcache_dependencies(kcache_tool = \"{}\"): expected \"auto\", \"source\" or the " +
                  "absolute path of an installed kcache binary").format(choice))
        if not ctx.path(choice).exists:
            fail(("kcache_dependencies(kcache_tool = \"{}\"): no such file. Install kcache there, " +
                  "or use \"auto\" (the kcache on PATH, else built from source) or \"source\"").format(choice))
        path = choice
    if path:
        # Not "kcache": a file named as its target is a dependency cycle.
        ctx.symlink(path, "bin/kcache")
        ctx.file("BUILD.bazel", """# The installed kcache at {path} (kcache_dependencies(kcache_tool = "{choice}")).
sh_binary(
    name = "kcache",
    srcs = ["bin/kcache"],
    visibility = ["//visibility:public"],
)
""".format(path = path, choice = choice))
    else:
        ctx.file("BUILD.bazel", """# kcache built from source (kcache_dependencies(kcache_tool = "{choice}"){why}).
alias(
    name = "kcache",
    actual = "{source}",
    visibility = ["//visibility:public"],
)
""".format(
            choice = choice,
            why = ": no kcache on PATH" if choice == "auto" else "",
            source = ctx.attr.source,
        ))

kcache_tool_repository = repository_rule(
    implementation = _kcache_tool_repository_impl,
    attrs = {
        "tool": attr.string(default = "auto"),
        # The from-source target, as an absolute label string.
        "source": attr.string(mandatory = True),
    },
    environ = ["PATH"],
    local = True,
)
