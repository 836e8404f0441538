"""cuda_kernel: compiles CUDA sources with `kcache compile` and embeds the bundle.

One `KcacheCompile` action per source writes the kernel bundle (.kcb) and C++
that embeds it; that C++ is compiled into a CcInfo, so a cc_library or
cc_binary that depends on the target ships its kernels.
"""

load("@bazel_tools//tools/cpp:toolchain_utils.bzl", "find_cpp_toolchain")
load("@bazel_skylib//rules:common_settings.bzl", "BuildSettingInfo")
load("@local_cuda//:toolkit.bzl", "CUDA_PATH")
load(":archs.bzl", "validate_archs", "validate_ptx")

CudaKernelInfo = provider(
    doc = "Device headers and include folders a cuda_kernel exports to kernels that depend on it.",
    fields = {
        "headers": "depset of Files: device headers (hdrs) of this target and its deps",
        "include_dirs": "depset of strings: -I folders for those headers (execroot-relative)",
    },
)

def _symbol_for(ctx, src, single):
    """A stable C++ name: the package, the target and (with several srcs) the source."""
    parts = [ctx.label.workspace_name, ctx.label.package, ctx.label.name]
    if not single:
        parts.append(src.basename[:-len(src.extension) - 1] if src.extension else src.basename)
    name = "_".join([p for p in parts if p])
    cleaned = "".join([c if c.isalnum() else "_" for c in name.elems()])
    return "kcache_" + cleaned

def _output_stem(ctx, src, single):
    if single:
        return ctx.label.name
    return ctx.label.name + "_" + (src.basename[:-len(src.extension) - 1] if src.extension else src.basename)

def _package_dir(ctx, path):
    """An `includes` entry of this package, as an execroot-relative folder."""
    parts = [p for p in [ctx.label.workspace_root, ctx.label.package, path] if p and p != "."]
    return "/".join(parts) if parts else "."

def _dep_headers_and_dirs(deps):
    headers = []
    dirs = []
    for dep in deps:
        if CudaKernelInfo in dep:
            headers.append(dep[CudaKernelInfo].headers)
            dirs.append(dep[CudaKernelInfo].include_dirs)
        if CcInfo in dep:
            cc = dep[CcInfo].compilation_context
            headers.append(cc.headers)
            dirs.extend([cc.includes, cc.quote_includes, cc.system_includes])
    return headers, dirs

def _cuda_kernel_impl(ctx):
    if not ctx.files.srcs:
        fail("cuda_kernel {}: srcs is empty, so there is nothing to compile: list the .cu sources, ".format(ctx.label) +
             "e.g. srcs = [\"saxpy.cu\"] (one bundle each)")
    archs = ctx.attr.archs or ctx.attr._default_archs[BuildSettingInfo].value
    ptx = ctx.attr.ptx or ctx.attr._default_ptx[BuildSettingInfo].value
    if ptx == "none":
        ptx = ""
    validate_archs(ctx.label, archs)
    validate_ptx(ctx.label, ptx)
    if not archs and not ptx:
        fail("cuda_kernel {}: nothing to compile: archs is empty and ptx is \"none\"; ".format(ctx.label) +
             "list real archs (archs = [\"sm_90\"]) or a virtual one (ptx = \"compute_90\")")

    dep_headers, dep_dirs = _dep_headers_and_dirs(ctx.attr.deps)
    own_dirs = [_package_dir(ctx, d) for d in ctx.attr.includes]
    include_dirs = depset(
        # The workspace root and the generated-files root, so includes can be
        # written from the root ("pkg/util.cuh"), as in C++ under Bazel.
        direct = ["."] + ([ctx.label.workspace_root] if ctx.label.workspace_root else []) +
                 [ctx.bin_dir.path] + own_dirs,
        transitive = dep_dirs,
    )
    headers = depset(ctx.files.hdrs, transitive = dep_headers)

    kcbs, ccs, hs = [], [], []
    single = len(ctx.files.srcs) == 1
    for src in ctx.files.srcs:
        stem = _output_stem(ctx, src, single)
        kcb = ctx.actions.declare_file(stem + ".kcb")
        cc = ctx.actions.declare_file(stem + ".kcb.cc")
        h = ctx.actions.declare_file(stem + ".h")
        args = ctx.actions.args()
        args.add(src)
        if archs:
            args.add_joined("--arch", archs, join_with = ",")
        if ptx:
            args.add("--ptx", ptx)
        args.add_all(include_dirs, before_each = "-I", uniquify = True)
        args.add_all(ctx.attr.defines, before_each = "-D")
        if ctx.attr.std:
            args.add("--std", ctx.attr.std)
        args.add_all(ctx.attr.name_expressions, before_each = "--name-expression")
        args.add_all(ctx.attr.nvrtc_opts, format_each = "--nvrtc-opt=%s")
        if not ctx.attr.lean:
            args.add("--no-lean")
        args.add("--cuda-path", ctx.attr._cuda_path)
        # Hermetic by default: a store only if the user opts in with
        # --action_env=KCACHE_DIR=... (see README), never one under $HOME.
        args.add("--no-default-store")
        args.add("-o", kcb)
        args.add("--cc-out", cc)
        args.add("--h-out", h)
        args.add("--symbol", _symbol_for(ctx, src, single))
        # Named by the hint to declare a header (never part of a key).
        args.add("--target", str(ctx.label))
        # `kcache compile @file`: always a params file, which is what lets
        # Bazel run the action in a persistent worker (`kcache compile
        # --persistent_worker`, one long-lived process that reuses NVRTC's
        # precompiled headers; see README "Persistent worker").
        args.use_param_file("@%s", use_always = True)
        args.set_param_file_format("multiline")
        verb = ctx.actions.args()
        verb.add("compile")
        ctx.actions.run(
            executable = ctx.executable._kcache,
            arguments = [verb, args],
            execution_requirements = {"supports-workers": "1"},
            inputs = depset([src], transitive = [headers]),
            tools = ctx.files._nvrtc_libraries,
            outputs = [kcb, cc, h],
            mnemonic = "KcacheCompile",
            progress_message = "Compiling CUDA kernel {} for {}".format(
                src.short_path,
                ", ".join(archs + ([ptx] if ptx else [])),
            ),
            # --action_env values (KCACHE_DIR, KCACHE_REMOTE, ...) reach the tool.
            use_default_shell_env = True,
        )
        kcbs.append(kcb)
        ccs.append(cc)
        hs.append(h)

    cc_toolchain = find_cpp_toolchain(ctx)
    feature_configuration = cc_common.configure_features(
        ctx = ctx,
        cc_toolchain = cc_toolchain,
        requested_features = ctx.features,
        unsupported_features = ctx.disabled_features,
    )
    embedded = ctx.attr._embedded[CcInfo]
    compilation_context, compilation_outputs = cc_common.compile(
        name = ctx.label.name,
        actions = ctx.actions,
        feature_configuration = feature_configuration,
        cc_toolchain = cc_toolchain,
        srcs = ccs,
        public_hdrs = hs,
        compilation_contexts = [embedded.compilation_context],
    )
    linking_context, _ = cc_common.create_linking_context_from_compilation_outputs(
        name = ctx.label.name,
        actions = ctx.actions,
        feature_configuration = feature_configuration,
        cc_toolchain = cc_toolchain,
        compilation_outputs = compilation_outputs,
        linking_contexts = [embedded.linking_context],
        # Nothing references an embedded bundle's object file by symbol when
        # only load_all() finds it through its static registration.
        alwayslink = True,
    )
    return [
        DefaultInfo(files = depset(kcbs)),
        cc_common.merge_cc_infos(
            direct_cc_infos = [CcInfo(
                compilation_context = compilation_context,
                linking_context = linking_context,
            )],
            cc_infos = [embedded],
        ),
        CudaKernelInfo(
            headers = headers,
            include_dirs = depset(own_dirs, transitive = [
                dep[CudaKernelInfo].include_dirs
                for dep in ctx.attr.deps
                if CudaKernelInfo in dep
            ]),
        ),
        OutputGroupInfo(
            bundles = depset(kcbs),
            generated_sources = depset(ccs + hs),
        ),
    ]

cuda_kernel = rule(
    implementation = _cuda_kernel_impl,
    doc = """Compiles CUDA kernels with NVRTC through kcache and embeds them in C++.

Each source becomes a kernel bundle (`<name>.kcb`, the default output) holding a
cubin per arch and optionally PTX, and a header `<name>.h` declaring an accessor
for the embedded bundle. Depend on the target from a cc_library or cc_binary
and load it with the kcache runtime. Output groups: `bundles`,
`generated_sources`.
""",
    attrs = {
        "srcs": attr.label_list(
            allow_files = [".cu"],
            mandatory = True,
            doc = "CUDA sources (.cu), one bundle each.",
        ),
        "hdrs": attr.label_list(
            allow_files = [".cuh", ".h", ".hpp", ".hh", ".inl", ".inc"],
            doc = "Device headers these sources include; also exported to cuda_kernel targets that depend on this one. " +
                  "The compile reads only these, the sources and the headers of deps (sandboxed or in the " +
                  "persistent worker): a header included but not declared is a build error.",
        ),
        "deps": attr.label_list(
            providers = [[CcInfo], [CudaKernelInfo]],
            doc = "cuda_kernel targets or cc_library targets whose headers these sources include.",
        ),
        "archs": attr.string_list(
            doc = "Real archs to build cubins for, e.g. [\"sm_80\", \"sm_90a\"]. " +
                  "Default: the --@kcache//rules:archs build setting (sm_80,sm_90).",
        ),
        "ptx": attr.string(
            doc = "A virtual arch to also emit PTX for (driver JIT on newer GPUs), e.g. \"compute_90\", " +
                  "or \"none\". Default: the --@kcache//rules:ptx build setting (compute_90).",
        ),
        "defines": attr.string_list(doc = "Macros: NAME or NAME=VALUE. Applied before any -D/-U in nvrtc_opts."),
        "includes": attr.string_list(
            doc = "Include folders relative to this package; exported to dependent cuda_kernel targets.",
        ),
        "std": attr.string(default = "c++17", doc = "The C++ dialect NVRTC compiles: c++17, c++20."),
        "nvrtc_opts": attr.string_list(doc = "Extra NVRTC options, e.g. [\"-lineinfo\"]; -D and -U here apply in their order, after defines ([\"-UX\", \"-DX=1\"] defines X)."),
        "name_expressions": attr.string_list(
            doc = "Template instances to look up by name at run time, e.g. [\"scale<float>\"].",
        ),
        "lean": attr.bool(
            default = True,
            doc = "Lean images: remove the library variables (template static constexpr members, " +
                  "...) that nothing references and no host can name from NVRTC's PTX and assemble the cubin with nvJitLink, " +
                  "so the image loads many times faster. False: NVRTC's bytes exactly " +
                  "(`kcache compile --no-lean`).",
        ),
        "_kcache": attr.label(
            default = Label("//rules:kcache_tool"),
            executable = True,
            cfg = "exec",
        ),
        # The toolkit the repository rule found (rules/private/cuda_toolkit.bzl).
        "_cuda_path": attr.string(default = CUDA_PATH),
        "_nvrtc_libraries": attr.label(
            default = Label("@local_cuda//:nvrtc_libraries"),
            cfg = "exec",
        ),
        "_default_archs": attr.label(default = Label("//rules:archs")),
        "_default_ptx": attr.label(default = Label("//rules:ptx")),
        "_embedded": attr.label(default = Label("//bundle:embedded"), providers = [CcInfo]),
        "_cc_toolchain": attr.label(default = Label("@bazel_tools//tools/cpp:current_cc_toolchain")),
    },
    fragments = ["cpp"],
    toolchains = ["@bazel_tools//tools/cpp:toolchain_type"],
    incompatible_use_toolchain_transition = True,
)
