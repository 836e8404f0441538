// What the probes files share. probes.h's work is cut by role, one file
// each, so that the two halves a reader looks for (what a compile's probes
// mean, and whether they still hold) are each read in one file:
//  - probes_disk.cc: a probe's name and stat on the disk (toolkit labels,
//    canonical names, an absent name's folder stamp, the stamp a lookup may
//    take for the bytes), used by both halves;
//  - probes_nvrtc_own.cc: the paths NVRTC names for itself, left unkeyed;
//  - probes_classify.cc: classifying the last round's probes after a compile;
//  - probes_rounds.cc: what the other rounds and the served files add to it;
//  - probes_hold.cc: checking the keyed probes again on a lookup, and the
//    lines the key hashes for them.
// Private to //compiler/seal:probes.
#pragma once

#include <fcntl.h>

#include <cstdint>
#include <ctime>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "cache/format/manifest.h"
#include "compiler/seal/probes.h"

namespace kcache::compiler::probe_parts {

constexpr const char* kToolkitLabel = "toolkit";

// `path` strictly beneath the folder `dir` (empty: beneath nothing).
bool under(const std::string& path, const std::string& dir);

// A folder's identity and last change: a name added to, removed from or
// renamed in it changes its mtime and ctime.
struct FolderState {
  uint64_t dev = 0, ino = 0, mtime_ns = 0, ctime_ns = 0;
  bool operator==(const FolderState& o) const {
    return dev == o.dev && ino == o.ino && mtime_ns == o.mtime_ns && ctime_ns == o.ctime_ns;
  }
};

// What one classification (ClassifyScope) already asked the disk: its probes
// share their folders. realpath() reads every component's link again for
// each (~10 system calls a name), and an absent name's folder walk
// (record_folder) stats every folder above it: a CUB compile's ~1,000 absent
// names made ~13,000 stats of /usr, /usr/local, ... before.
struct ClassifyMemo {
  std::unordered_map<std::string, std::string> canonical;
  // record_folder's walk: a name with no entry (true), or its stat as a
  // folder (false, with `folder` empty when it is no folder).
  struct Walked {
    bool absent = false;
    std::optional<FolderState> folder;
  };
  std::unordered_map<std::string, Walked> walked;
};

// Makes the calls beneath it on this thread share one ClassifyMemo (the
// outermost scope's).
class ClassifyScope {
 public:
  ClassifyScope();
  ~ClassifyScope();

 private:
  ClassifyMemo* outer_;
  ClassifyMemo memo_;
};

// `path`'s real name (realpath), or for a missing name its folder's real name
// and the rest: memoized within a ClassifyScope.
std::string canonical(const std::string& path);

// NVRTC's own business (probes_nvrtc_own.cc): what is_nvrtc_own says of a
// path (a probe left unkeyed as the driver's JIT cache: kDriverCacheLabel).

enum class Own { no, yes, driver_cache };
Own is_nvrtc_own(const std::string& path, const std::string& real, const ProbeContext& c,
                 const std::vector<std::string>& toolkit_reals);
bool loader_name(const std::string& path, const ProbeContext& c);
bool driver_cache_path(const std::string& path);
bool nvrtc_library(const std::string& path);
bool glibc_reads(const std::string& path, const std::string& real);
bool nvrtc_own_kind(const std::string& path);

// "toolkit<i>:<rel>" for a path beneath toolkit folder i, else nullopt.
std::optional<std::string> toolkit_name(const std::string& named, const ProbeContext& c);

// A recorded probe path on this machine now: the folder it is below (a
// toolkit folder, or "/" for an absolute path) and the components under it.
struct DiskPath {
  std::string base;
  std::vector<std::string> components;
  std::string relative() const {
    std::string out;
    for (const std::string& part : components) out += (out.empty() ? "" : "/") + part;
    return out;
  }
  std::string full() const {
    std::string out = base == "/" ? "" : base;
    for (const std::string& part : components) out += "/" + part;
    return out;
  }
  // The folder `depth` components below base.
  std::string folder(size_t depth) const {
    std::string out = base;
    for (size_t i = 0; i < depth; ++i) out += (out.back() == '/' ? "" : "/") + components[i];
    return out;
  }
};

// A recorded probe path (a toolkit label, "program-folder:", or absolute) on
// this machine now; nullopt for a name that cannot be one.
std::optional<DiskPath> disk_path(const std::string& recorded, const ProbeContext& c);

uint64_t ns_of(const struct timespec& t);
std::optional<FolderState> folder_state(const std::string& path);

// For an absent probe: its deepest existing folder's stamp, where it may
// stand for the absence (probe's has_folder), else nothing set.
void record_folder(const DiskPath& path, int64_t started_ns, cache::ManifestProbe* p);

struct Stat {
  bool file = false;  // a regular file (what an include can read)
  // Something neither a file nor a folder (a FIFO, a device, a socket): the
  // seal refuses it, so it is not the absence a probe recorded.
  bool other = false;
  uint64_t dev = 0, ino = 0, size = 0, mtime_ns = 0, ctime_ns = 0;
};

// `path` relative to the open folder `dir` (AT_FDCWD: as it is).
Stat stat_of(const std::string& path, int dir = AT_FDCWD);

// Keeps the stamp in `p` only where it may stand for the bytes.
void keep_stamp_if_it_stands(const std::string& path, uint64_t mtime_ns, uint64_t ctime_ns,
                             int64_t started_ns, cache::ManifestProbe* p);

}  // namespace kcache::compiler::probe_parts
