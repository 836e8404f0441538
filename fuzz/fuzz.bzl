"""libFuzzer targets that also run as ordinary tests.

    load("//fuzz:fuzz.bzl", "kcache_fuzzer")

    kcache_fuzzer(
        name = "bundle_fuzzer",
        srcs = ["bundle_fuzzer.cc"],   # defines LLVMFuzzerTestOneInput
        deps = ["//bundle"],
        corpus = glob(["corpus/bundle/*"]),
    )

makes
  - `<name>`: under `--config=fuzz` (clang-14, `--define=kcache_fuzz=1`) a real
    libFuzzer binary (`bazel-bin/fuzz/<name> -runs=1000000 CORPUS_COPY/`);
    otherwise the same code linked with a small replay main that runs the
    files or folders given as arguments once each (any compiler, e.g. gcc).
  - `<name>_replay_test`: a cc_test that replays the checked-in corpus through
    LLVMFuzzerTestOneInput with that replay main, so every CI run re-checks
    every seed (and every crash reproducer added to the corpus).
"""

load("@rules_cc//cc:defs.bzl", "cc_binary", "cc_test")

def kcache_fuzzer(name, srcs, deps = [], corpus = [], **kwargs):
    """A libFuzzer target and a test replaying its corpus.

    Args:
      name: the fuzzer binary; the test is `<name>_replay_test`.
      srcs: C++ sources defining `extern "C" int LLVMFuzzerTestOneInput(const uint8_t*, size_t)`.
      deps: libraries the sources need.
      corpus: seed inputs (files), checked in next to the fuzzer.
      **kwargs: passed to both targets (e.g. `tags`, `copts`).
    """
    native.filegroup(
        name = name + "_corpus",
        srcs = corpus,
    )
    cc_binary(
        name = name,
        srcs = srcs,
        deps = deps + select({
            "//fuzz:fuzzing": [],
            "//conditions:default": ["//fuzz:replay_main"],
        }),
        linkopts = select({
            "//fuzz:fuzzing": ["-fsanitize=fuzzer"],
            "//conditions:default": [],
        }),
        testonly = True,
        **kwargs
    )
    cc_test(
        name = name + "_replay_test",
        srcs = srcs,
        deps = deps + ["//fuzz:replay_main"],
        data = [":" + name + "_corpus"],
        args = ["$(locations :%s_corpus)" % name],
        **kwargs
    )
