"""Analysis tests: what `bazel run //:install` and the wheel ship is built
-c opt, whatever -c the build was given (CI's is fastbuild)."""

load("@bazel_skylib//lib:unittest.bzl", "analysistest", "asserts")

_SHIPPED = ["cli/kcache", "nvrtc_shim/libnvrtc.so.13", "cache/remote/reapi/libkcache_reapi.so"]

def _install_ships_opt_test_impl(ctx):
    env = analysistest.begin(ctx)
    target = analysistest.target_under_test(env)
    files = target[DefaultInfo].default_runfiles.files.to_list()
    by_path = {f.short_path: f for f in files}
    for shipped in _SHIPPED:
        asserts.true(env, shipped in by_path, "//:install's runfiles lack %s" % shipped)
        if shipped in by_path:
            # Bazel names an output folder after its compilation mode
            # (bazel-out/k8-opt-ST-.../bin, bazel-out/k8-fastbuild/bin).
            path = by_path[shipped].path
            asserts.true(env, "-opt" in path.split("/")[1], "//:install ships %s, not an -c opt build" % path)
    return analysistest.end(env)

install_ships_opt_test = analysistest.make(_install_ships_opt_test_impl)

def _wheel_from_opt_test_impl(ctx):
    env = analysistest.begin(ctx)
    actions = [a for a in analysistest.target_actions(env) if a.mnemonic == "KcacheWheel"]
    asserts.equals(env, 1, len(actions), "one KcacheWheel action")
    for action in actions:
        inputs = {f.short_path: f.path for f in action.inputs.to_list()}
        for shipped in _SHIPPED:
            path = inputs.get(shipped, "")
            asserts.true(env, "-opt" in (path.split("/") + ["", ""])[1], "the wheel packs %r, not an -c opt build of %s" % (path, shipped))
    return analysistest.end(env)

wheel_from_opt_test = analysistest.make(_wheel_from_opt_test_impl)
