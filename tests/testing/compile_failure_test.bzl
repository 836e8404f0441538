"""compile_failure_test: a C++ file that must not compile, and why.

The test compiles `src` twice with the target's C++ compiler (syntax only,
-std=c++17, the include folders and headers of `deps`): without `define` it
must compile (so the headers and the call are right), with `-D<define>` it
must fail and its diagnostics must contain every string of `messages`.
"""

load("@bazel_tools//tools/cpp:toolchain_utils.bzl", "find_cpp_toolchain")

def _runfiles_dir(ctx, path):
    # An execroot-relative include folder as the test sees it from its
    # runfiles: generated folders lose their bazel-out prefix; external
    # repositories stay under external/ (legacy external runfiles).
    for root in [ctx.bin_dir.path, ctx.genfiles_dir.path]:
        if path == root:
            return "."
        if path.startswith(root + "/"):
            return path[len(root) + 1:]
    return path

def _quote(s):
    return "'" + s.replace("'", "'\\''") + "'"

def _compile_failure_test_impl(ctx):
    cc_toolchain = find_cpp_toolchain(ctx)
    compilation = cc_common.merge_cc_infos(
        cc_infos = [dep[CcInfo] for dep in ctx.attr.deps],
    ).compilation_context
    flags = ["-x", "c++", "-std=c++17", "-fsyntax-only"]
    for d in compilation.quote_includes.to_list():
        flags += ["-iquote", _runfiles_dir(ctx, d)]
    for d in compilation.includes.to_list():
        flags += ["-I", _runfiles_dir(ctx, d)]
    for d in compilation.system_includes.to_list():
        flags += ["-isystem", _runfiles_dir(ctx, d)]
    flags += ["-D" + d for d in compilation.defines.to_list()]
    compiler = cc_toolchain.compiler_executable
    script = ctx.actions.declare_file(ctx.label.name + ".sh")
    ctx.actions.write(script, is_executable = True, content = """#!/usr/bin/env bash
set -uo pipefail
compile() {{ {compiler} {flags} "$@" {src} 2>&1; }}
if ! out=$(compile); then
  echo "$out"
  echo "FAIL: {src} does not compile without -D{define}: the test's headers or call are wrong"
  exit 1
fi
if out=$(compile -D{define}); then
  echo "FAIL: {src} compiled with -D{define}; it must not"
  exit 1
fi
echo "$out"
status=0
for message in {messages}; do
  if ! grep -qF -- "$message" <<<"$out"; then
    echo "FAIL: the diagnostics above do not say: $message"
    status=1
  fi
done
[ "$status" = 0 ] && echo "PASS: {src} fails to compile with -D{define}, saying why"
exit "$status"
""".format(
        compiler = _quote(compiler),
        flags = " ".join([_quote(f) for f in flags]),
        src = _quote(ctx.file.src.short_path),
        define = ctx.attr.define,
        messages = " ".join([_quote(m) for m in ctx.attr.messages]),
    ))
    runfiles = ctx.runfiles(
        files = [ctx.file.src],
        transitive_files = depset(transitive = [compilation.headers, cc_toolchain.all_files]),
    )
    return [DefaultInfo(executable = script, runfiles = runfiles)]

compile_failure_test = rule(
    implementation = _compile_failure_test_impl,
    doc = "A C++ file that compiles, and fails to compile with -D`define`, saying `messages`.",
    test = True,
    attrs = {
        "src": attr.label(allow_single_file = [".cc"], mandatory = True, doc = "The C++ file."),
        "deps": attr.label_list(providers = [CcInfo], doc = "Libraries whose headers it includes."),
        "define": attr.string(mandatory = True, doc = "The macro that makes it wrong."),
        "messages": attr.string_list(mandatory = True, doc = "What its diagnostics must contain."),
        "_cc_toolchain": attr.label(default = Label("@bazel_tools//tools/cpp:current_cc_toolchain")),
    },
    toolchains = ["@bazel_tools//tools/cpp:toolchain_type"],
    fragments = ["cpp"],
)
