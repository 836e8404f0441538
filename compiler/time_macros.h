// The time macros, as ccache treats them: a compile whose input uses
// `__TIME__` or `__TIMESTAMP__` gives another result every second, so it is
// compiled and never stored nor looked up (counter `uncached_time_macros`);
// `__DATE__` changes once a day, so its value is keyed. The `time_macros`
// sloppiness (cache/config.h: `sloppiness = time_macros`, KCACHE_SLOPPINESS,
// --sloppiness) turns both off. docs/KEYS.md, "Time macros".
//
// The search is textual (memmem over bytes already read, so the hit path pays
// a few microseconds): a name in a comment or a string counts too (a lost hit,
// never a wrong one). A name the preprocessor forms (`a ## TIME__`) or splits
// with a backslash-newline is not seen, as in ccache.
#pragma once

#include <ctime>
#include <mutex>
#include <string>
#include <string_view>

namespace kcache::compiler {

// `__TIME__` or `__TIMESTAMP__` as a whole identifier. (NVRTC 13 defines no
// __TIMESTAMP__, nvcc's host compiler does; both are treated alike.)
bool uses_time_macros(std::string_view text);

// `__DATE__` as a whole identifier.
bool uses_date_macro(std::string_view text);

// What NVRTC expands __DATE__ to at `when`: local time, "Nov 23 2026",
// "Nov  3 2026" (measured with NVRTC 13.0 under several TZ settings).
std::string date_macro_value(std::time_t when);

// localtime_r takes glibc's time-zone lock, which glibc does not reset in a
// fork's child: a host that forks while a kcache thread holds it leaves the
// child waiting for good at its next localtime. date_macro_value calls it
// under this mutex, which the drop-in holds across a host's fork
// (nvrtc_shim/shim.cc), so no kcache thread is inside it then.
std::mutex& local_time_mutex();

}  // namespace kcache::compiler
