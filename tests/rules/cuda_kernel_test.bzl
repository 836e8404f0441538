"""Analysis tests for cuda_kernel: the KcacheCompile action's argv and every fail() message."""

load("@bazel_skylib//lib:unittest.bzl", "analysistest", "asserts")
load("//rules:defs.bzl", "cuda_kernel")

def _compile_actions(env):
    actions = [a for a in analysistest.target_actions(env) if a.mnemonic == "KcacheCompile"]
    asserts.true(env, len(actions) > 0, "no KcacheCompile action")
    return actions

def _flag_values(argv, flag):
    """Every value that follows `flag` in argv."""
    return [argv[i + 1] for i in range(len(argv) - 1) if argv[i] == flag]

# --- argv of a fully specified kernel ----------------------------------------

def _full_argv_test_impl(ctx):
    env = analysistest.begin(ctx)
    action = _compile_actions(env)[0]
    argv = action.argv
    asserts.equals(env, "compile", argv[1])
    asserts.equals(env, "tests/rules/testdata/scale.cu", argv[2])
    asserts.equals(env, ["sm_80,sm_90a"], _flag_values(argv, "--arch"))
    asserts.equals(env, ["compute_80"], _flag_values(argv, "--ptx"))
    asserts.equals(env, ["N=4", "FAST"], _flag_values(argv, "-D"))
    asserts.equals(env, ["c++20"], _flag_values(argv, "--std"))
    asserts.equals(env, ["scale<float>", "scale<double>"], _flag_values(argv, "--name-expression"))
    asserts.true(env, "--nvrtc-opt=-lineinfo" in argv, "nvrtc_opts not passed as --nvrtc-opt=")
    includes = _flag_values(argv, "-I")
    asserts.true(env, "." in includes, "the workspace root is not an include folder")
    asserts.true(env, "tests/rules/testdata/include" in includes, "includes attr not passed: %s" % includes)
    asserts.true(env, "--no-default-store" in argv, "the action must not use a store under $HOME")
    asserts.equals(env, ["kcache_tests_rules_full"], _flag_values(argv, "--symbol"))
    outputs = sorted([f.basename for f in action.outputs.to_list()])
    asserts.equals(env, ["full.h", "full.kcb", "full.kcb.cc"], outputs)
    inputs = [f.short_path for f in action.inputs.to_list()]
    asserts.true(env, "tests/rules/testdata/include/scale_util.cuh" in inputs, "hdrs are not inputs")
    asserts.false(env, "--no-lean" in argv, "lean images are the default")
    basenames = [f.basename for f in action.inputs.to_list()]
    asserts.true(env, "libnvJitLink.so" in basenames, "nvJitLink is not an action input: %s" % basenames)
    return analysistest.end(env)

full_argv_test = analysistest.make(_full_argv_test_impl)

# --- lean = False ----------------------------------------------------------------

def _not_lean_test_impl(ctx):
    env = analysistest.begin(ctx)
    argv = _compile_actions(env)[0].argv
    asserts.true(env, "--no-lean" in argv, "lean = False must pass --no-lean: %s" % argv)
    return analysistest.end(env)

not_lean_test = analysistest.make(_not_lean_test_impl)

# --- defaults come from the build settings ------------------------------------

def _default_archs_test_impl(ctx):
    env = analysistest.begin(ctx)
    argv = _compile_actions(env)[0].argv
    asserts.equals(env, ["sm_90a,sm_100"], _flag_values(argv, "--arch"))
    asserts.equals(env, [], _flag_values(argv, "--ptx"), "ptx=none must drop --ptx")
    return analysistest.end(env)

default_archs_test = analysistest.make(
    _default_archs_test_impl,
    config_settings = {
        "//rules:archs": ["sm_90a", "sm_100"],
        "//rules:ptx": "none",
    },
)

def _builtin_defaults_test_impl(ctx):
    env = analysistest.begin(ctx)
    action = _compile_actions(env)[0]
    argv = action.argv
    asserts.equals(env, ["sm_80,sm_90"], _flag_values(argv, "--arch"))
    asserts.equals(env, ["compute_90"], _flag_values(argv, "--ptx"))
    asserts.equals(env, ["c++17"], _flag_values(argv, "--std"))
    asserts.true(
        env,
        "tests/rules/testdata/scale.cu" in action.progress_message if hasattr(action, "progress_message") else True,
        "the progress message should name the kernel",
    )
    return analysistest.end(env)

builtin_defaults_test = analysistest.make(_builtin_defaults_test_impl)

# --- headers from deps ----------------------------------------------------------

def _deps_headers_test_impl(ctx):
    env = analysistest.begin(ctx)
    action = _compile_actions(env)[0]
    inputs = [f.short_path for f in action.inputs.to_list()]
    asserts.true(env, "tests/rules/testdata/include/scale_util.cuh" in inputs,
                 "a cuda_kernel dep's hdrs must be inputs")
    asserts.true(env, "tests/rules/testdata/lib/math.cuh" in inputs,
                 "a cc_library dep's headers must be inputs")
    includes = _flag_values(action.argv, "-I")
    asserts.true(env, "tests/rules/testdata/include" in includes,
                 "a cuda_kernel dep's includes must be -I folders: %s" % includes)
    asserts.true(env, "tests/rules/testdata/lib_include" in includes,
                 "a cc_library dep's includes must be -I folders: %s" % includes)
    return analysistest.end(env)

deps_headers_test = analysistest.make(_deps_headers_test_impl)

# --- several sources ---------------------------------------------------------------

def _several_srcs_test_impl(ctx):
    env = analysistest.begin(ctx)
    actions = _compile_actions(env)
    asserts.equals(env, 2, len(actions))
    symbols = sorted([_flag_values(a.argv, "--symbol")[0] for a in actions])
    asserts.equals(env, ["kcache_tests_rules_two_other", "kcache_tests_rules_two_scale"], symbols)
    return analysistest.end(env)

several_srcs_test = analysistest.make(_several_srcs_test_impl)

# --- fail() messages -------------------------------------------------------------

def _failure_test_impl(ctx):
    env = analysistest.begin(ctx)
    asserts.expect_failure(env, ctx.attr.message)
    return analysistest.end(env)

_MESSAGE = {"message": attr.string(doc = "What the fail() message must contain.")}

failure_test = analysistest.make(_failure_test_impl, attrs = _MESSAGE, expect_failure = True)
nothing_to_compile_test = analysistest.make(
    _failure_test_impl,
    attrs = _MESSAGE,
    expect_failure = True,
    config_settings = {"//rules:archs": [], "//rules:ptx": "none"},
)
bad_default_arch_test = analysistest.make(
    _failure_test_impl,
    attrs = _MESSAGE,
    expect_failure = True,
    config_settings = {"//rules:archs": ["sm_1"]},
)

def _arch_number(arch):
    return int("".join([c for c in arch.elems() if c.isdigit()]))

def _unknown_arch_sorted_test_impl(ctx):
    env = analysistest.begin(ctx)
    causes = analysistest.target_under_test(env)[AnalysisFailureInfo].causes.to_list()
    message = causes[0].message
    marker = "Valid archs for CUDA "
    asserts.true(env, marker in message, "no arch list in: " + message)
    listed = message[message.rfind(marker):].split(": ", 1)[1].split("\n")[0].strip().split(", ")
    numbers = [_arch_number(a) for a in listed]
    asserts.equals(env, sorted(numbers), numbers, "archs not in numeric order: " + ", ".join(listed))
    return analysistest.end(env)

unknown_arch_sorted_test = analysistest.make(_unknown_arch_sorted_test_impl, expect_failure = True)

def _failing_kernel(name, **kwargs):
    cuda_kernel(name = name, srcs = ["testdata/scale.cu"], tags = ["manual"], **kwargs)

def cuda_kernel_test_suite(name):
    """Declares the targets under test and the tests; `name` is the test_suite."""
    cuda_kernel(
        name = "full",
        srcs = ["testdata/scale.cu"],
        hdrs = ["testdata/include/scale_util.cuh"],
        archs = ["sm_80", "sm_90a"],
        ptx = "compute_80",
        defines = ["N=4", "FAST"],
        includes = ["testdata/include"],
        std = "c++20",
        nvrtc_opts = ["-lineinfo"],
        name_expressions = ["scale<float>", "scale<double>"],
        tags = ["manual"],
    )
    full_argv_test(name = "full_argv_test", target_under_test = ":full")

    cuda_kernel(name = "not_lean", srcs = ["testdata/scale.cu"], lean = False, tags = ["manual"])
    not_lean_test(name = "not_lean_test", target_under_test = ":not_lean")

    _failing_kernel("defaults")
    default_archs_test(name = "default_archs_test", target_under_test = ":defaults")
    builtin_defaults_test(name = "builtin_defaults_test", target_under_test = ":defaults")

    native.cc_library(
        name = "header_only_lib",
        hdrs = ["testdata/lib/math.cuh"],
        includes = ["testdata/lib_include"],
        tags = ["manual"],
    )
    cuda_kernel(
        name = "with_deps",
        srcs = ["testdata/scale.cu"],
        deps = [":full", ":header_only_lib"],
        tags = ["manual"],
    )
    deps_headers_test(name = "deps_headers_test", target_under_test = ":with_deps")

    cuda_kernel(
        name = "two",
        srcs = ["testdata/scale.cu", "testdata/other.cu"],
        tags = ["manual"],
    )
    several_srcs_test(name = "several_srcs_test", target_under_test = ":two")

    failures = {
        "unknown_arch": ({"archs": ["sm_91"]}, "unknown arch \"sm_91\". Valid archs for CUDA"),
        "virtual_in_archs": ({"archs": ["compute_90"]}, "is a virtual arch: put it in ptx, not archs"),
        "unknown_ptx": ({"ptx": "compute_91"}, "unknown ptx arch \"compute_91\""),
        "real_in_ptx": ({"ptx": "sm_90"}, "is a real arch: put it in archs; ptx takes compute_XY"),
        "duplicate_arch": ({"archs": ["sm_80", "sm_80"]}, "arch \"sm_80\" is listed twice"),
        "misspelt_arch": ({"archs": ["sm90"]}, "unknown arch \"sm90\" (did you mean \"sm_90\"?). Valid archs for CUDA"),
        "misspelt_ptx": ({"ptx": "Compute-90"}, "unknown ptx arch \"Compute-90\" (did you mean \"compute_90\"?)"),
    }
    cuda_kernel(name = "no_srcs", srcs = [], tags = ["manual"])
    failure_test(
        name = "no_srcs_test",
        target_under_test = ":no_srcs",
        message = "srcs is empty, so there is nothing to compile: list the .cu sources",
    )
    unknown_arch_sorted_test(name = "unknown_arch_sorted_test", target_under_test = ":unknown_arch")

    for kernel, (attrs, message) in failures.items():
        _failing_kernel(kernel, **attrs)
        failure_test(name = kernel + "_test", target_under_test = ":" + kernel, message = message)
    nothing_to_compile_test(
        name = "nothing_to_compile_test",
        target_under_test = ":defaults",
        message = "nothing to compile: archs is empty and ptx is \"none\"",
    )
    bad_default_arch_test(
        name = "bad_default_arch_test",
        target_under_test = ":defaults",
        message = "unknown arch \"sm_1\"",
    )

    native.test_suite(
        name = name,
        tests = [
            ":full_argv_test",
            ":not_lean_test",
            ":default_archs_test",
            ":builtin_defaults_test",
            ":deps_headers_test",
            ":several_srcs_test",
            ":nothing_to_compile_test",
            ":no_srcs_test",
            ":unknown_arch_sorted_test",
            ":bad_default_arch_test",
        ] + [":" + kernel + "_test" for kernel in failures],
    )
