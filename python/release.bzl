"""The files kcache releases (`bazel run //:install`, `bazel run //:wheel`),
built optimized whatever the command line's -c.

`release_file(name, src)` is `src`'s one file built in the release
configuration: -c opt (every hit is a whole kcache process: at -c opt it takes
0.71-0.74x fastbuild's CPU time, docs/PERFORMANCE.md), and an rpath that finds the libraries a
wheel bundles in the prefix's lib/ folder: `$ORIGIN/../lib` from bin/kcache,
`$ORIGIN/..` from lib/kcache/ (the drop-in and the gRPC plugin). Both entries
are in every file because one configuration builds all three: a second
configuration would compile every source again, in CI too. An installed
kcache without bundled libraries uses the system's, as before (an rpath
folder that holds no such library is passed over).

DT_RPATH (--disable-new-dtags), not DT_RUNPATH: the loader searches an
object's DT_RPATH for the libraries its dependencies need too, so the gRPC
plugin's bundled libgrpc++ finds its own bundled libgrpc, libabsl_* and the
rest; a DT_RUNPATH applies to the object's direct dependencies only.
"""

_RPATH = "$ORIGIN/../lib:$ORIGIN/.."

def _release_transition_impl(settings, _attr):
    return {
        "//command_line_option:compilation_mode": "opt",
        "//command_line_option:linkopt": settings["//command_line_option:linkopt"] + [
            "-Wl,--disable-new-dtags",
            "-Wl,-rpath," + _RPATH,
        ],
    }

_release_transition = transition(
    implementation = _release_transition_impl,
    inputs = ["//command_line_option:linkopt"],
    outputs = [
        "//command_line_option:compilation_mode",
        "//command_line_option:linkopt",
    ],
)

def _release_file_impl(ctx):
    # A 1:1 transition's attribute is still a list of one.
    files = ctx.attr.src[0][DefaultInfo].files.to_list()
    if len(files) != 1:
        fail("release_file(src = {}) expects a target of one file, it has {}".format(
            ctx.attr.src[0].label,
            len(files),
        ))
    return [DefaultInfo(
        files = depset(files),
        runfiles = ctx.runfiles(files = files),
    )]

release_file = rule(
    implementation = _release_file_impl,
    doc = "The one file of `src`, built -c opt with the release rpath (see the file's doc).",
    attrs = {
        "src": attr.label(
            cfg = _release_transition,
            mandatory = True,
            doc = "A target of one file: a cc_binary, or a cc_binary that makes a shared library.",
        ),
        "_allowlist_function_transition": attr.label(
            default = "@bazel_tools//tools/allowlists/function_transition_allowlist",
        ),
    },
)

def _kcache_wheel_impl(ctx):
    # A folder: the wheel's name holds the version and the glibc of the
    # machine that builds it, neither known before the action runs.
    out = ctx.actions.declare_directory(ctx.label.name)
    package = ctx.files.package[0].dirname
    ctx.actions.run(
        executable = "python3",
        arguments = [
            ctx.file._builder.path,
            "--kcache",
            ctx.file.kcache.path,
            "--shim",
            ctx.file.shim.path,
            "--reapi",
            ctx.file.reapi.path,
            "--package",
            package,
            out.path,
        ],
        inputs = [ctx.file._builder, ctx.file.kcache, ctx.file.shim, ctx.file.reapi] + ctx.files.package,
        outputs = [out],
        mnemonic = "KcacheWheel",
        progress_message = "Writing kcache's wheel into %s" % out.short_path,
        # ldd and readelf read the system's libraries, which are no declared
        # input (kcache links them from the system, as tools/install_deps.sh
        # installs them).
        use_default_shell_env = True,
    )
    return [DefaultInfo(files = depset([out]), runfiles = ctx.runfiles(files = [out]))]

kcache_wheel = rule(
    implementation = _kcache_wheel_impl,
    doc = "A folder holding kcache's wheel, written by build_wheel.py.",
    attrs = {
        "kcache": attr.label(allow_single_file = True, mandatory = True, doc = "The kcache binary (a release_file)."),
        "shim": attr.label(allow_single_file = True, mandatory = True, doc = "The drop-in libnvrtc.so.13 (a release_file)."),
        "reapi": attr.label(allow_single_file = True, mandatory = True, doc = "The gRPC plugin (a release_file)."),
        "package": attr.label_list(allow_files = [".py"], mandatory = True, doc = "The Python package's files, all in one folder."),
        "_builder": attr.label(allow_single_file = True, default = "//python:build_wheel.py"),
    },
)
