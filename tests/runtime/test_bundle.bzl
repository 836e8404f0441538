"""Test fixtures: kernels compiled with the toolkit's nvcc into .kcb bundles.

Stands in for `kcache compile` (branch `compiler`) until it lands; then each
test_bundle becomes a genrule running `//cli:kcache compile ... -o x.kcb`.
"""

load("@local_cuda//:toolkit.bzl", "CUDA_PATH")

def test_bundle(name, src, cubins = [], ptx = [], name_expressions = [], symbol = None):
    """Compiles `src` for each arch and wraps the images into `<name>.kcb`.

    Outputs `<name>.kcb`, each image as `<name>.<arch>.cubin|ptx` (for tools
    that want the raw image, such as the cuda.core comparison), and with
    `symbol` a cc_library `<name>_embedded` that registers the bundle under it
    (alwayslink, as generated bundle code must be).
    """
    nvcc = CUDA_PATH + "/bin/nvcc"
    outs = [name + ".kcb"]
    cmds = []
    flags = ["--out $(@D)/%s.kcb" % name, "--source-name %s" % src.split("/")[-1]]
    for arch in cubins:
        out = "%s.%s.cubin" % (name, arch)
        outs.append(out)
        cmds.append("%s -std=c++17 -cubin -arch=%s -o $(@D)/%s $(location %s)" % (nvcc, arch, out, src))
        flags.append("--image cubin:%s:$(@D)/%s" % (arch, out))
    for arch in ptx:
        out = "%s.%s.ptx" % (name, arch)
        outs.append(out)
        cmds.append("%s -std=c++17 -ptx -arch=%s -o $(@D)/%s $(location %s)" % (nvcc, arch, out, src))
        flags.append("--image ptx:%s:$(@D)/%s" % (arch, out))
    for expression in name_expressions:
        flags.append("--name-expression '%s'" % expression)
    if symbol:
        outs.append(name + "_embedded.cc")
        flags.append("--cc-out $(@D)/%s_embedded.cc --symbol %s" % (name, symbol))
    cmds.append("$(location //tests/runtime:make_test_bundle) " + " ".join(flags))
    native.genrule(
        name = name + "_gen",
        srcs = [src],
        outs = outs,
        cmd = " && ".join(cmds),
        tools = ["//tests/runtime:make_test_bundle"],
        message = "nvcc: test bundle " + name,
    )
    if symbol:
        native.cc_library(
            name = name + "_embedded",
            srcs = [name + "_embedded.cc"],
            deps = ["//bundle:embedded"],
            alwayslink = True,
            testonly = True,
        )
