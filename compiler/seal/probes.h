// What the paths a sealed NVRTC named (seal.h) mean for a key.
//
// Under the seal NVRTC can read the toolkit's include folders and nothing of
// the user's, and every path it names is recorded. After a compile each
// recorded path is one of:
//  - a toolkit path (beneath a folder it was given with -I): a file it read,
//    keyed by its content, or a path it found absent, keyed by that: a header
//    added to or edited in the toolkit's folders changes the key of exactly
//    the kernels whose NVRTC looked there;
//  - NVRTC's own business (its libraries, the time zone, character sets, the
//    dynamic loader's search, its PCH folder): not keyed;
//  - a user path: absent, keyed by that (a computed `__has_include` of a file
//    that appears later must not be answered from the cache); or an existing
//    file NVRTC was refused, which the compile must hand over (by its
//    absolute name) and compile again, because NVRTC's answer (false, or a
//    "cannot open" error) is not the file system's.
// A lookup checks each keyed path against the disk (probes_hold), cheaply
// where a file's stat is the one recorded.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "cache/format/manifest.h"
#include "compiler/seal/seal.h"

namespace kcache::compiler {

struct ProbeContext {
  // Absolute, in NVRTC's -I order: "/usr/local/cuda/include", ".../cccl".
  std::vector<std::string> toolkit_dirs;
  // Folders whose files are NVRTC's own (its library folder, its PCH folder).
  std::vector<std::string> own_dirs;
  // NVRTC's library folder: the seal lets NVRTC read it, so a file there that
  // is no library makes a result unkeyable.
  std::string nvrtc_library_dir;
  // Not sloppy about time macros (time_macros.h): a toolkit header NVRTC read
  // that uses __TIME__, __TIMESTAMP__ or __DATE__ makes the result unkeyable.
  bool check_time_macros = true;
  // The compile's NVRTC saw the real file system (seal.h, SealPolicy::serve):
  // an existing user file it only probed (stat, access) is keyed by its
  // content like a toolkit file, never handed; `user_dirs` (its -I folders,
  // absolute) are never NVRTC's own, wherever they lie (a Python package's
  // headers under /usr/lib); `date_keyed`: the key holds today's __DATE__,
  // so a file read that uses it is keyed (not only __TIME__ makes it
  // unkeyable).
  bool served = false;
  // A lookup's program folder (absolute): where a probe recorded as
  // "program-folder:/rel" (lookup_record.h, kSourceFolderPrefix) is checked.
  std::string program_folder;
  // Served: the folder NVRTC worked in (absolute; empty: this process's).
  std::string working_folder;
  std::vector<std::string> user_dirs;
  bool date_keyed = false;
  // The mount table changed while NVRTC compiled (MountTableWatch): a name
  // NVRTC only looked at that is there now may have been mounted in after
  // its look, with every stamp on its way old (a mount point shows the
  // mounted folder's own).
  bool mounts_changed = false;
  // Served: the names the seal answered "no such file" as the driver's JIT
  // cache (SealPolicy::hidden_folders): each keyed as that (`own:<path>`,
  // held only while the lookup's environment puts the same path in the
  // driver's cache), never by what is there.
  std::set<std::string> hidden;
};

// Whether this process's mount table changed since the watch was made: an
// open /proc/self/mountinfo, polled (the kernel marks it POLLPRI on every
// mount and unmount in the namespace). Three system calls a compile, none a
// probe. Where /proc cannot be opened, every look counts as changed.
class MountTableWatch {
 public:
  MountTableWatch();
  ~MountTableWatch();
  MountTableWatch(const MountTableWatch&) = delete;
  MountTableWatch& operator=(const MountTableWatch&) = delete;
  bool changed() const;

 private:
  int fd_;
  mutable bool changed_ = false;
};

struct ClassifiedProbes {
  std::vector<cache::ManifestProbe> keyed;  // sorted by path
  std::vector<std::string> user_files;      // existing user files NVRTC was refused
  std::string unkeyable;                    // why the result cannot be stored, or empty
};

// Classifies `probes` (absolute, from NvrtcOutput::probes) of a compile that
// started at `started_ns` (CLOCK_REALTIME): a toolkit file changed since then
// may have been read half old, half new, and makes the result unkeyable.
ClassifiedProbes classify_probes(const std::vector<std::string>& probes, const ProbeContext& c,
                                 int64_t started_ns);

// An include NVRTC asked for (it failed with "cannot open") had been searched
// for in the toolkit's folders and was absent there; the round that asked
// leaves no record of its own, so these absences are added to `into` (one per
// toolkit folder, as classify_probes would record them): a header appearing
// there later changes the key. One there now appeared during the compile and
// sets `unkeyable`. Absolute names and names with `..` are not searched there.
void add_asked_absences(const std::string& spelling, const ProbeContext& c, int64_t started_ns,
                        ClassifiedProbes* into);

// Adds the files a serving seal handed NVRTC (seal.h) to `into`: each keyed
// present with the hash of the bytes NVRTC was served, beneath a toolkit
// folder by its name there. A file changed since `started_ns`, served twice
// with different bytes, or (not sloppy) using a time macro the key does not
// hold sets `unkeyable`.
void add_served(const std::vector<ServedFile>& served, const ProbeContext& c, int64_t started_ns,
                ClassifiedProbes* into);

// Adds `earlier`'s keyed probes (a round of NVRTC before the last: one that
// failed on an include it could not open, or one whose answer kcache had to
// correct) to `into`. A path that two rounds found in different states
// changed during the compile and makes the result unkeyable.
void merge_earlier_round(const ClassifiedProbes& earlier, ClassifiedProbes* into);

// True if every recorded probe still holds on the disk: an absent path is
// still no file; a present one has the recorded content (taken as unchanged
// where its stat is the recorded one, else read and hashed). Where one does
// not hold, `why` (if given) gets the first that did not, as a user reads it
// ("inc/v.h changed", "inc/w.h appeared"; beneath the working folder
// relative to it): a miss's reason.
bool probes_hold(const std::vector<cache::ManifestProbe>& probes, const ProbeContext& c,
                 std::string* why = nullptr);

// `paths` (absolute, as NVRTC named them) less NVRTC's own business (its libraries,
// the time zone, /proc, the loader's search: classify_probes leaves it
// unkeyed), which differs between two compile processes (malloc reads
// /proc/sys/vm/overcommit_memory once per process).
std::vector<std::string> without_nvrtc_own(std::vector<std::string> paths, const ProbeContext& c);

// `path` without "." components and repeated slashes ("x/./y", "x//y": x/y).
std::string without_dot_parts(const std::string& path);

// The label of a probe left unkeyed as the driver's JIT cache ("own:<path>",
// held only while the lookup's environment puts <path> there).
constexpr const char* kDriverCacheLabel = "own:";

// The lines the key hashes for `probes` (CompileRequest::probes), sorted.
std::vector<std::string> probe_key_lines(const std::vector<cache::ManifestProbe>& probes);

}  // namespace kcache::compiler
