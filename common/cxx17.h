// kcache's headers are C++17 (std::optional, std::string_view, inline
// variables). Bazel 4's default toolchain compiles with -std=c++0x, which
// otherwise fails hundreds of lines later inside kcache's headers, far from
// the cause. This says the cause in one line and stops the compile there.
#pragma once

#if defined(__cplusplus) && __cplusplus < 201703L
#error "kcache needs C++17: add `build --cxxopt=-std=c++17 --host_cxxopt=-std=c++17` to your .bazelrc (see the README, Using kcache in your Bazel workspace)"
// A missing include is fatal: nothing after the line above is compiled, so
// it is the only error.
#include "kcache: compile stopped here, see the C++17 error above"
#endif
