// The paths NVRTC names for itself, which a key leaves out: the dynamic
// loader looking for libcuda in the system's library folders (NVRTC tries to
// load it on every compile; where there is no driver the search differs with
// the process's history), the time zone, character-set modules, process
// files. A computed `__has_include` of a name in a system library folder is
// therefore not keyed (docs/KEYS.md); an #include of one still fails and is
// handed over.
#include <algorithm>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "common/environment.h"
#include "compiler/seal/probes.h"
#include "compiler/seal/probes_parts.h"
#include "compiler/seal/seal.h"

namespace kcache::compiler::probe_parts {
namespace {

bool ends_with(const std::string& s, const char* suffix) {
  size_t n = std::char_traits<char>::length(suffix);
  return s.size() >= n && s.compare(s.size() - n, n, suffix) == 0;
}

// A name the dynamic loader may try for a library: lib*.so*, never a header.
bool library_name(const std::string& path) {
  std::string base = path.substr(path.rfind('/') + 1);
  if (base.compare(0, 3, "lib") != 0 || base.find(".so") == std::string::npos) return false;
  return !header_named(base);
}

// The first four bytes of a file (fewer if it is shorter); nothing if it
// cannot be opened.
std::optional<std::string> magic_of(const std::string& path) {
  char magic[4] = {};
  FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return std::nullopt;
  size_t n = std::fread(magic, 1, sizeof magic, f);
  std::fclose(f);
  return std::string(magic, n);
}

}  // namespace

// A name the dynamic loader tried for NVRTC: libcuda in NVRTC's library
// folder (its RUNPATH, hwcaps subfolders), absent where the driver is
// elsewhere or missing, and looked for or not with the process's history.
// Serving, the loader's calls are never recorded (seal.h): no name is.
bool loader_name(const std::string& path, const ProbeContext& c) {
  return !c.served && library_name(path) &&
         path.compare(path.rfind('/') + 1, 7, "libcuda") == 0;
}

// The driver's JIT cache (driver_cache_folders: $CUDA_CACHE_PATH and
// $HOME/.nv/ComputeCache; served, seal.h hides it from NVRTC): a live driver in
// the process (CuPy, kcache_jit) has the sealed NVRTC name its files. Where
// that is depends on the environment of the process that classifies, so a
// probe left unkeyed for this reason is recorded as `own:<path>` (a lookup
// in another environment, where the path is no longer the driver's, misses),
// and a header-named file there is never the driver's: it is keyed like any
// user path.
bool driver_cache_path(const std::string& path) {
  return hidden_name(path, driver_cache_folders());
}

// `toolkit_reals`: the toolkit folders' real names. Nothing here reads the
// environment except driver_cache_path, whose answer is recorded.
Own is_nvrtc_own(const std::string& path, const std::string& real, const ProbeContext& c,
                 const std::vector<std::string>& toolkit_reals) {
  // A toolkit path reached by another spelling (a link to the toolkit's
  // folder, /usr/local/cuda for /usr/local/cuda-13.0) is no library of
  // NVRTC's, whatever its name or folder: NVRTC can read it.
  for (const std::string& d : toolkit_reals) {
    if (real == d || under(real, d)) return Own::no;
  }
  if (c.served) {
    // Serving (seal.h): NVRTC read every other file through the supervisor,
    // and the loader's calls are not recorded; what is left as its own is
    // what Landlock lets it read itself and what the process reads by
    // itself. Any other name it looked at is keyed, whatever its folder.
    for (const char* file : kProcessFiles) {
      if (path == file || under(path, file)) return Own::yes;
    }
    if (path == "/etc/localtime" || under(path, "/usr/share/zoneinfo") ||
        path.find("/gconv/") != std::string::npos) {
      return Own::yes;
    }
    if (!c.nvrtc_library_dir.empty() &&
        (under(path, c.nvrtc_library_dir) || under(real, canonical(c.nvrtc_library_dir)))) {
      return Own::yes;
    }
    for (const std::string& d : c.own_dirs) {
      if (under(path, d) || under(real, canonical(d))) return Own::yes;
    }
    return Own::no;
  }
  if (under(path, "/dev/shm")) return Own::no;  // files anyone can put there
  for (const std::string& d : c.user_dirs) {
    if (path == d || under(path, d) || under(real, canonical(d))) return Own::no;
  }
  for (const char* folder : {"/proc", "/sys", "/dev", "/usr/share/zoneinfo", "/lib", "/lib32",
                             "/lib64", "/usr/lib", "/usr/lib32", "/usr/lib64", "/usr/local/lib",
                             "/usr/local/lib64"}) {
    if (path == folder || under(path, folder)) return Own::yes;
  }
  for (const char* file : {"/etc/localtime", "/etc/ld.so.cache", "/etc/ld.so.preload"}) {
    if (path == file) return Own::yes;
  }
  // (NVRTC's look at its working folder, $PWD, is left out by the process
  // it ran in: nvrtc.cc.) $LD_LIBRARY_PATH's folders are no longer NVRTC's
  // own by the variable: the loader's names there are library names (below),
  // and anything else there is keyed like any user path.
  // The loader's search for libcuda in folders of its own (RUNPATHs, hwcaps
  // subfolders, $LD_LIBRARY_PATH): library names only, so a header there is
  // still keyed.
  if (library_name(path)) return Own::yes;
  for (const std::string& d : c.own_dirs) {
    if (under(path, d) || under(real, canonical(d))) return Own::yes;
  }
  if (driver_cache_path(path)) return Own::driver_cache;
  return Own::no;
}

// NVRTC's own libraries by name (libnvrtc.so.13, libnvrtc-builtins.so.13.0,
// libnvrtc.alt.so.13 and their links), in whatever folder: the compiler's
// identity fingerprints the ones it loads (toolkit.h).
bool nvrtc_library(const std::string& path) {
  return path.compare(path.rfind('/') + 1, 8, "libnvrtc") == 0 && library_name(path);
}

// What glibc reads for NVRTC by itself: the time zone's data (TZif, beneath
// the zone folder) and iconv's configuration in a gconv folder.
bool glibc_reads(const std::string& path, const std::string& real) {
  const size_t slash = path.rfind('/');
  const std::string base = path.substr(slash + 1);
  const std::string folder = path.substr(0, slash);
  if (under(path, "/usr/share/zoneinfo") || under(real, "/usr/share/zoneinfo")) {
    return magic_of(path) == std::optional<std::string>("TZif");
  }
  if (base == "gconv-modules" || base == "gconv-modules.cache") return ends_with(folder, "/gconv");
  return ends_with(folder, "/gconv/gconv-modules.d") && ends_with(base, ".conf");
}

// Files in NVRTC's own readable folders (its library folder, the time zones,
// character sets) are not keyed, which is exact only while they are what
// NVRTC itself reads there: libraries, zone data, gconv module lists. Any
// other file there (a header a computed include named by its absolute path)
// was read unkeyed. (Handed only: served, such files are keyed.)
bool nvrtc_own_kind(const std::string& path) {
  std::string base = path.substr(path.rfind('/') + 1);
  if (base.compare(0, 12, "gconv-module") == 0) return true;
  const std::optional<std::string> magic = magic_of(path);
  if (!magic) return true;  // not readable: NVRTC did not read it either
  return *magic == "\x7f" "ELF" || *magic == "TZif";
}

}  // namespace kcache::compiler::probe_parts

namespace kcache::compiler {

std::vector<std::string> without_nvrtc_own(std::vector<std::string> paths, const ProbeContext& c) {
  using namespace probe_parts;
  ClassifyScope memo;
  std::vector<std::string> toolkit_reals;
  for (const std::string& d : c.toolkit_dirs) toolkit_reals.push_back(canonical(d));
  paths.erase(std::remove_if(paths.begin(), paths.end(),
                             [&](const std::string& path) {
                               return !toolkit_name(path, c) &&
                                      is_nvrtc_own(path, canonical(path), c, toolkit_reals) !=
                                          Own::no;
                             }),
              paths.end());
  return paths;
}

}  // namespace kcache::compiler
