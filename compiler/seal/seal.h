// The seal: what NVRTC may open while it compiles, enforced by the kernel,
// and a record of every path it asked the kernel about.
//
// Contract. run_sealed(policy, fn) runs `fn` on a new thread and returns when
// it has returned and every thread or process it started has ended (one
// still alive a second after `fn` returned is given up on: the result says
// not sealed). That thread blocks the program's signals. While `fn` runs that
// thread (and any thread it creates):
//  - has a working directory of its own (unshare(CLONE_FS)): the innermost of
//    a chain of kSealDepth folders made for it and deleted again, so a
//    relative name resolves to nothing and `..` climbs through deleted folders;
//  - can open for reading only files beneath `policy.readable` and for
//    reading and writing only beneath `policy.writable` (a Landlock domain,
//    which no code on that thread can lift): any other existing file fails
//    with EACCES, whatever name reaches it (absolute, `..`, symbolic links);
//  - has every system call that names a path (open, openat, stat, access,
//    readlink, ...) reported to a supervisor thread by the kernel (seccomp
//    user notification) before it runs: SealResult::probes lists those paths.
// The boundary does not depend on `fn`'s cooperation: a library that calls
// the kernel directly is held by it too.
//
// Where the kernel refuses any part of it (no Landlock, a seccomp filter that
// forbids ours, no unshare), `fn` still runs, on a thread without the
// boundary, and SealResult::sealed is false with `why` saying what was
// refused: its result is right for this compile but must not be cached.
//
// Thread safety: any number of run_sealed calls may run at once; each has its
// own thread, domain and supervisor.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/hash.h"

namespace kcache::compiler {

struct SealPolicy {
  SealPolicy() = default;
  SealPolicy(std::vector<std::string> readable_, std::vector<std::string> writable_)
      : readable(std::move(readable_)), writable(std::move(writable_)) {}
  std::vector<std::string> readable;  // folders (or files) readable beneath
  std::vector<std::string> writable;  // folders readable and writable beneath
  // Serving (issue 27): `fn` sees the real file system. Its working
  // directory is `working_dir` (empty: this process's), not the deleted
  // chain, and every open for reading of a path outside `readable` and
  // `writable` is made by the supervisor instead: it opens the file itself,
  // copies it into a sealed memfd (a snapshot no one can change), hashes
  // exactly those bytes and installs the memfd as the call's result
  // (SECCOMP_IOCTL_NOTIF_ADDFD with SECCOMP_ADDFD_FLAG_SEND, Linux 5.14+).
  // So every byte `fn` reads outside its own folders is in
  // SealResult::served. Only regular files of at most `max_file_bytes` are
  // served; a folder is answered with the folder (nothing to read: NVRTC
  // opens one named like a header while it searches), any other (a FIFO,
  // a device) is refused with EACCES and named in SealResult::refused.
  bool serve = false;
  std::string working_dir;
  uint64_t max_file_bytes = uint64_t{64} << 20;
  // The sealed thread and its supervisor share one CPU, the one the sealed
  // thread starts on: each path call is then a switch between two threads
  // of one CPU, where across CPUs each would wake an idle one, which on a
  // virtual machine (every cloud CI runner) costs tens of microseconds,
  // twice per call (a drop-in miss of cuda_fp16 on a 2-vCPU VM: 1.03x NVRTC
  // alone pinned, 1.17x not). When the pair waits for that CPU (another
  // compile pinned there too, issue 27: two at twice NVRTC's time), the
  // supervisor moves both to the CPU idlest since it last looked.
  // Off for a compile that runs on several threads itself (NVRTC's
  // -split-compile).
  bool one_cpu = false;
  // Serving: every path call naming something beneath these folders (absolute,
  // no `..`) is answered "no such file" (ENOENT), except a header-named file
  // (hidden_name) and what lies in `readable` or `writable`: the driver's JIT
  // cache (driver_cache_folders), which a live driver in the process has
  // NVRTC read, and whose bytes would otherwise be keyed, so each write of
  // the driver's lost every hit made before it. NVRTC compiles as without a
  // cache. Each name so answered is in SealResult::hidden.
  std::vector<std::string> hidden_folders;
};

// Files a compile process opens by itself while NVRTC compiles (glibc's
// malloc its overcommit setting, sysconf the CPUs), beneath these names.
// Serving, opens of these are left to Landlock (which refuses them, as
// without serving) and the dynamic loader's opens too (told apart by where
// the call comes from); any other open beneath /proc or /sys is refused as
// not servable (a pseudo-file's bytes are not a file's), and everything else
// is served.
constexpr const char* kProcessFiles[] = {"/proc/sys/vm/overcommit_memory",
                                         "/sys/devices/system/cpu"};

// A file the supervisor served (SealPolicy::serve): the absolute name `fn`
// opened it by (lexically resolved), the hash of the snapshot's bytes, and
// the file's stat when it was opened.
//
// `known`: served from the file itself, not a copy. This process took a
// snapshot of it before, when it already had this stat and that stat stood
// for its bytes (common/stamp_trust.h: older than the writeback window, on a
// file system whose stamps hold). Its stat and its bytes are checked again
// after `fn` returned (a write through a shared mapping within the window
// changes no stamp).
// `ctime_ns` UINT64_MAX: the file changed
// while it was read (a copy that grew or shrank, a known file written to);
// what `fn` read is then not known. KCACHE_SNAPSHOT_REUSE=off takes a copy
// every time.
struct ServedFile {
  std::string path;
  Hash128 content;
  uint64_t dev = 0, ino = 0, size = 0, mtime_ns = 0, ctime_ns = 0;
  bool known = false;
};

struct SealResult {
  bool sealed = false;
  std::string why;  // when not sealed: what the kernel refused
  // Every path `fn` named to the kernel, in first-use order, each once.
  // Relative names are resolved against the sealed working directory: those
  // that stay inside the deleted chain (where nothing can exist) are left
  // out; those that climb out of it are given as the absolute path they
  // reach. Absolute names are given as written.
  std::vector<std::string> probes;
  // Serving: the paths of `probes` and `served` that `fn` named relative to
  // its working folder (no folder descriptor, no chdir before), each once: a
  // lookup in another working folder checks them beneath that one. A path
  // also named absolutely is in `absolute_names` too.
  std::vector<std::string> relative_names;
  std::vector<std::string> absolute_names;
  // Serving only: every file served, in first-open order (a file opened
  // twice is listed twice, each with the bytes of its own snapshot), and the
  // first path refused, with why ("a FIFO"), or empty.
  std::vector<ServedFile> served;
  std::string refused;
  // SealPolicy::one_cpu: how often the pair moved off a CPU it waited for.
  int cpu_moves = 0;
  // Serving: the names answered "no such file" by SealPolicy::hidden_folders
  // (absolute, lexically resolved), each once.
  std::vector<std::string> hidden;
};

// The folder an absolute source name is handed under (nvrtc.h): it exists
// nowhere, so what NVRTC finds absent beneath it says nothing about the disk
// (probes.h leaves it unkeyed; a quoted include NVRTC searched there comes
// back as an ask, keyed with its answer).
constexpr char kSealedSourceRoot[] = "/kcache-sealed";

// Depth of the deleted chain: a relative name needs more `..` than this to
// climb out of it (and then meets the Landlock domain).
constexpr int kSealDepth = 32;

SealResult run_sealed(const SealPolicy& policy, const std::function<void()>& fn);

// Tests that edit files faster than the writeback window: the window of
// common/stamp_trust.h (shared with lookup records and manifests).
void set_snapshot_settle_margin_for_testing(int64_t ns);

// Whether this kernel can seal at all (Landlock and seccomp user
// notification), and if not, why; checked once per process. KCACHE_SEAL=off
// in the environment turns the seal off (every result then goes uncached),
// for measuring what it costs.
bool seal_available(std::string* why);

// `dirs` and the targets of the symbolic links directly in each: a toolkit
// assembled from links (conda, some CI images) is read through them, and
// Landlock judges the file a link leads to, not the link.
std::vector<std::string> with_link_targets(const std::vector<std::string>& dirs);

// `path` relative to the working directory `cwd` (absolute, no symbolic links
// in it), with `.` and `..` folded lexically: exact for the part inside `cwd`,
// which is made of real folders only. Exposed for tests.
std::string resolve_lexically(const std::string& cwd, const std::string& path);

// Whether `path` has a ".." part. Allocates nothing (the supervisor uses it).
bool has_parent_part(std::string_view path);

// Whether a file's last name part ends like a header's (.h, .cuh, .hpp, ...).
bool header_named(std::string_view path);

// The driver's JIT cache folders in this process's environment, lexically
// folded: $CUDA_CACHE_PATH and $HOME/.nv/ComputeCache, each where absolute
// (both: a driver already running may have read either).
std::vector<std::string> driver_cache_folders();

// Whether the absolute, `..`-free `path` is `folders`' own: one of them or
// beneath one, and not header-named (a header there is a user's file).
// Allocates nothing (the supervisor uses it).
bool hidden_name(std::string_view path, const std::vector<std::string>& folders);

}  // namespace kcache::compiler
