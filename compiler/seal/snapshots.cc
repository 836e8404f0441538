#include "common/environment.h"
#include "compiler/seal/snapshots.h"

#include <linux/openat2.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "common/stamp_trust.h"
#include "compiler/seal/raw_calls.h"

namespace kcache::compiler::seal {

// ---- SnapshotCache: the files whose bytes this process knows ------------------

SnapshotCache* SnapshotCache::acquire() {
  static SnapshotCache* cache = [] {
    writeback_window_ns();  // read now: the supervisor reads no file of its own
    const char* off = env::read(env::Var::kcache_snapshot_reuse);
    if (off && std::strcmp(off, "off") == 0) return static_cast<SnapshotCache*>(nullptr);
    auto* made = new SnapshotCache;  // lives as long as the process
    if (!made->ok()) return static_cast<SnapshotCache*>(nullptr);
    return made;
  }();
  if (!cache || cache->busy_.exchange(true, std::memory_order_acquire)) return nullptr;
  return cache;
}

const Snapshot* SnapshotCache::find(const char* path, size_t len, const struct stat& st) const {
  const Entry* e = slot(path, len);
  if (!e || !e->used) return nullptr;
  return has_stat(e->snap, st) ? &e->snap : nullptr;
}

void SnapshotCache::remember(const char* path, size_t len, const Snapshot& snap, int64_t now_ns) {
  if (!stamp_settled(snap.mtime_ns, snap.ctime_ns, now_ns)) return;
  Entry* e = slot(path, len);
  if (!e) return;
  if (!e->used) {
    if (used_slots_ >= kSlots / 4 * 3 || kPathBytes - path_used_ < len) return;  // full
    std::memcpy(paths_ + path_used_, path, len);
    e->hash = hash_of(path, len);
    e->offset = static_cast<uint32_t>(path_used_);
    e->length = static_cast<uint32_t>(len);
    path_used_ += len;
    ++used_slots_;
    e->used = true;
  }
  e->snap = snap;
}

SnapshotCache::SnapshotCache() {
  // Reserved, not used: pages appear as entries do.
  void* p = ::mmap(nullptr, kSlots * sizeof(Entry) + kPathBytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) return;
  entries_ = static_cast<Entry*>(p);
  paths_ = static_cast<char*>(p) + kSlots * sizeof(Entry);
}

uint64_t SnapshotCache::hash_of(const char* path, size_t len) {  // FNV-1a
  uint64_t h = 14695981039346656037ull;
  for (size_t i = 0; i < len; ++i) h = (h ^ static_cast<unsigned char>(path[i])) * 1099511628211ull;
  return h;
}

// The entry for `path`, or the free one it would take; null if neither
// (the table is never more than 3/4 full, so a probe ends).
SnapshotCache::Entry* SnapshotCache::slot(const char* path, size_t len) const {
  const uint64_t h = hash_of(path, len);
  for (size_t i = 0, at = h & (kSlots - 1); i < kSlots; ++i, at = (at + 1) & (kSlots - 1)) {
    Entry& e = entries_[at];
    if (!e.used) return &e;
    if (e.hash == h && e.length == len && std::memcmp(paths_ + e.offset, path, len) == 0) return &e;
  }
  return nullptr;
}

// ---- Known files, checked again after the compile ----------------------------

namespace {

bool known_bytes_unchanged(const ServedFile& f) {
  int fd = ::open(f.path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) return false;
  struct stat st;
  bool same = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && has_stat(f, st);
  if (same) {
    Hasher128 hasher;
    std::vector<char> buf(size_t{1} << 16);  // not on the stack: the caller may be a small thread's
    uint64_t read_bytes = 0;
    for (ssize_t n; (n = ::read(fd, buf.data(), buf.size())) != 0;) {
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 || (read_bytes += static_cast<uint64_t>(n)) > f.size) {
        same = false;
        break;
      }
      hasher.update(std::string_view(buf.data(), static_cast<size_t>(n)));
    }
    same = same && read_bytes == f.size && hasher.digest() == f.content;
  }
  ::close(fd);
  return same;
}

}  // namespace

void check_known_files(SealResult* out) {
  for (ServedFile& f : out->served) {
    if (f.known && !known_bytes_unchanged(f)) f.ctime_ns = UINT64_MAX;
  }
}

// ---- SnapshotServer: opens answered with snapshots ----------------------------

namespace {

// Why a file of stat `st` is not served (static text), or null.
const char* not_servable(const struct stat& st, uint64_t max_file_bytes) {
  if (S_ISFIFO(st.st_mode)) return "a FIFO";
  if (S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode)) return "a device";
  if (S_ISSOCK(st.st_mode)) return "a socket";
  if (!S_ISREG(st.st_mode)) return "not a regular file";
  if (static_cast<uint64_t>(st.st_size) > max_file_bytes) return "over the size limit";
  return nullptr;
}

}  // namespace

SnapshotServer::SnapshotServer(int listener, RecordArena* arena, const SealPolicy& policy,
                               int cwd_fd, const std::string& cwd, SnapshotCache* known)
    : listener_(listener),
      arena_(arena),
      policy_(policy),
      cwd_fd_(cwd_fd),
      cwd_(cwd),
      known_(known) {
  base_.resize(kMaxPath + 1);
  absolute_.resize(2 * kMaxPath + 2);
  resolved_.resize(kMaxPath + 1);
  pid_ = ::getpid();
  copy_.resize(size_t{1} << 16);
  // Bound now: a first call through the PLT would enter the loader (the
  // supervisor's rule).
  hasher_.update(std::string_view("", 0));
  hasher_.digest();
  hasher_.reset();
}

long SnapshotServer::serve(const seccomp_notif& req, char* path, size_t read_len) {
  OpenCall call;
  if (!open_call(req.data, &call)) return kContinue;
  // Writing, creating, a folder or a bare handle: not a file read; the
  // Landlock domain judges it as it stands.
  if ((call.flags & O_ACCMODE) != O_RDONLY ||
      (call.flags & (O_CREAT | O_TRUNC | O_DIRECTORY | O_PATH | O_TMPFILE)) != 0) {
    return kContinue;
  }
  size_t path_len = read_len ? read_len : read_path(pid_, call.path_at, path);
  if (path_len == 0) return kContinue;
  path[path_len] = '\0';
  size_t base_len = 0;
  if (!base_of(call.dir, path, &base_len)) return kContinue;
  size_t abs_len =
      join_lexically(base_.data(), base_len, path, path_len, absolute_.data(), absolute_.size());
  // NVRTC's own files are named without `..`; a name with `..` that only
  // folds into its folders may lead anywhere through a link: served.
  const bool parents = has_parent_part(std::string_view(path, path_len));
  if (abs_len == 0) return kContinue;
  if (!parents && own(absolute_.data(), abs_len) && leads_to_own(absolute_.data())) {
    return kContinue;
  }
  if (pseudo(absolute_.data(), abs_len)) {
    arena_->append_refused(
        "a file of the kernel's or of a process (/proc, /sys, /dev/fd), not servable",
        absolute_.data(), abs_len);
    return -EACCES;
  }
  // Recorded as opened: "sub/../y.h" is the parent of wherever "sub" leads
  // (a linked folder's target's), which the kernel resolves on disk and a
  // lookup checks by the same spelling; folded, the key would name another
  // file. (Which folder it is beneath, above, is judged by the folded name.)
  if (parents) {
    abs_len = join_lexically(base_.data(), base_len, path, path_len, absolute_.data(),
                             absolute_.size(), /*keep_parents=*/true);
    if (abs_len == 0) return kContinue;
  }
  // The same name, opened from this thread: it shares the descriptor
  // table, so `dir` is valid here, and a relative name is taken from the
  // sealed thread's working directory.
  int at = path[0] == '/' ? AT_FDCWD : call.dir == AT_FDCWD ? cwd_fd_ : call.dir;
  long src = open_as_named(at, path, abs_len);
  if (src < 0) return src;  // as the kernel answers the sealed thread
  long answer = snapshot(req, static_cast<int>(src), call.flags, abs_len);
  raw_syscall(SYS_close, src);
  return answer;
}

bool SnapshotServer::hides(const seccomp_data& d, bool at, const char* path, size_t len) {
  if (policy_.hidden_folders.empty() || len == 0) return false;
  // A name with ".." may lead anywhere through a link: served, as named.
  if (has_parent_part(std::string_view(path, len))) return false;
  size_t base_len = 0;
  if (!base_of(at ? static_cast<int>(d.args[0]) : AT_FDCWD, path, &base_len)) return false;
  const size_t abs_len =
      join_lexically(base_.data(), base_len, path, len, absolute_.data(), absolute_.size());
  // NVRTC's own folders (its PCH folder, TMPDIR) stay its own, wherever they lie.
  if (abs_len == 0 ||
      !hidden_name(std::string_view(absolute_.data(), abs_len), policy_.hidden_folders) ||
      own(absolute_.data(), abs_len)) {
    return false;
  }
  arena_->append(kHiddenRecord, "", 0, absolute_.data(), static_cast<uint32_t>(abs_len));
  return true;
}

// Which open `d` is (open, openat, openat2), into `call`; false for any other.
bool SnapshotServer::open_call(const seccomp_data& d, OpenCall* call) const {
  if (d.nr == SYS_open) {
    call->path_at = d.args[0];
    call->flags = d.args[1];
  } else if (d.nr == SYS_openat) {
    call->dir = static_cast<int>(d.args[0]);
    call->path_at = d.args[1];
    call->flags = d.args[2];
  } else if (d.nr == 437 /* openat2 */) {
    call->dir = static_cast<int>(d.args[0]);
    call->path_at = d.args[1];
    iovec local{&call->flags, sizeof call->flags};  // open_how.flags comes first
    iovec remote{reinterpret_cast<void*>(d.args[2]), sizeof call->flags};
    return raw_syscall(SYS_process_vm_readv, pid_, reinterpret_cast<long>(&local), 1,
                       reinterpret_cast<long>(&remote), 1, 0) == sizeof call->flags;
  } else {
    return false;
  }
  return true;
}

// The folder `path` is relative to, into base_: *base_len 0 for an absolute
// path; false where the folder of `dir` is unknown.
bool SnapshotServer::base_of(int dir, const char* path, size_t* base_len) {
  *base_len = 0;
  if (path[0] == '/') return true;
  if (dir == AT_FDCWD) {
    *base_len = cwd_.size();
    std::memcpy(base_.data(), cwd_.data(), *base_len);
    return true;
  }
  *base_len = folder_of_fd(dir, base_.data());
  return *base_len != 0;
}

// Opens `path` (relative to `at`) to read, as the sealed thread named it:
// the descriptor, or -errno.
long SnapshotServer::open_as_named(int at, const char* path, size_t abs_len) {
  // Never through a /proc "magic link" (/dev/fd/3, a link to
  // /proc/self/fd/3): it names an open file of whichever process looks,
  // here this one's (a review found NVRTC served the store's own index).
  open_how how{};
  how.flags = O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY;
  how.resolve = RESOLVE_NO_MAGICLINKS;
  long src = raw_syscall(437 /* openat2 */, at, reinterpret_cast<long>(path),
                         reinterpret_cast<long>(&how), sizeof how);
  if (src == -ENOSYS) {  // before Linux 5.6
    src = raw_syscall(SYS_openat, at, reinterpret_cast<long>(path), static_cast<long>(how.flags));
  } else if (src == -ELOOP) {
    long plain = raw_syscall(SYS_openat, at, reinterpret_cast<long>(path),
                             static_cast<long>(how.flags | O_PATH));
    if (plain >= 0) {
      raw_syscall(SYS_close, plain);
      arena_->append_refused("an open file of a process (a link into /proc), not servable",
                             absolute_.data(), abs_len);
      return -EACCES;
    }
  }
  return src;
}

long SnapshotServer::snapshot(const seccomp_notif& req, int src, uint64_t flags, size_t abs_len) {
  // Before the stat: a file is kept known only if it had settled by then.
  timespec now{};
  if (known_) raw_syscall(SYS_clock_gettime, CLOCK_REALTIME, reinterpret_cast<long>(&now));
  struct stat st;
  if (raw_syscall(SYS_fstat, src, reinterpret_cast<long>(&st)) != 0) return -EACCES;
  // A folder opened to read is what NVRTC opens while it searches its -I
  // folders (`<foo>` where ./foo is a folder: it opens it, stats it and
  // goes on to the next folder, measured): answered with the folder as the
  // kernel answers, no bytes to serve (its stat is in the probes).
  if (S_ISDIR(st.st_mode)) {
    raw_syscall(SYS_fcntl, src, F_SETFL, 0);
    long fd = install(req, src, flags, abs_len);
    return fd == -EACCES ? -EACCES : kAnswered;
  }
  if (const char* refused = not_servable(st, policy_.max_file_bytes)) {
    arena_->append_refused(refused, absolute_.data(), abs_len);
    return -EACCES;
  }
  if (const Snapshot* known = known_ ? known_->find(absolute_.data(), abs_len, st) : nullptr) {
    // Its bytes are known (SnapshotCache): the file itself, as NVRTC
    // alone would open it (no O_NONBLOCK), checked again afterwards.
    if (raw_syscall(SYS_fcntl, src, F_SETFL, 0) == 0) {
      return send(req, src, flags, abs_len, *known, kServedKnownRecord);
    }
  }
  long mem = raw_syscall(SYS_memfd_create, reinterpret_cast<long>("kcache-snapshot"),
                         MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (mem < 0) return mem;
  // Kept known only on a local file system (SnapshotCache says why).
  struct statfs fs;
  const bool keep = known_ && raw_syscall(SYS_fstatfs, src, reinterpret_cast<long>(&fs)) == 0 &&
                    stamps_trusted_on_type(static_cast<uint64_t>(fs.f_type));
  long answer =
      fill_and_send(req, src, static_cast<int>(mem), st, flags, abs_len,
                    keep ? static_cast<int64_t>(now.tv_sec) * 1000000000 + now.tv_nsec : -1);
  raw_syscall(SYS_close, mem);
  return answer;
}

long SnapshotServer::fill_and_send(const seccomp_notif& req, int src, int mem,
                                   const struct stat& st, uint64_t flags, size_t abs_len,
                                   int64_t stat_ns /* -1: not kept */) {
  // Read, hashed and written through one buffer: no mapping to undo (an
  // munmap interrupts every CPU this process's threads ran on).
  uint64_t copied = 0;
  hasher_.reset();
  for (;;) {
    long n = raw_syscall(SYS_read, src, reinterpret_cast<long>(copy_.data()),
                         static_cast<long>(copy_.size()));
    if (n == -EINTR) continue;
    if (n < 0) return n;
    if (n == 0) break;
    copied += static_cast<uint64_t>(n);
    if (copied > policy_.max_file_bytes) {
      arena_->append_refused("over the size limit", absolute_.data(), abs_len);
      return -EACCES;
    }
    hasher_.update(std::string_view(copy_.data(), static_cast<size_t>(n)));
    for (long at = 0; at < n;) {
      long w = raw_syscall(SYS_write, mem, reinterpret_cast<long>(copy_.data() + at), n - at);
      if (w == -EINTR) continue;
      if (w <= 0) return w < 0 ? w : -EIO;
      at += w;
    }
  }
  constexpr long kSeals = F_SEAL_SEAL | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE;
  if (raw_syscall(SYS_fcntl, mem, F_ADD_SEALS, kSeals) != 0) return -EIO;
  if (raw_syscall(SYS_lseek, mem, 0, SEEK_SET) != 0) return -EIO;
  Snapshot snap{};
  snap.content = hasher_.digest();
  snap.dev = static_cast<uint64_t>(st.st_dev);
  snap.ino = static_cast<uint64_t>(st.st_ino);
  snap.size = copied;
  snap.mtime_ns = ns_of(st.st_mtim);
  snap.ctime_ns = ns_of(st.st_ctim);
  if (copied != static_cast<uint64_t>(st.st_size)) snap.ctime_ns = UINT64_MAX;  // grew or shrank
  long answer = send(req, mem, flags, abs_len, snap, kServedRecord);
  if (answer == kAnswered && known_ && stat_ns >= 0) {
    known_->remember(absolute_.data(), abs_len, snap, stat_ns);
  }
  return answer;
}

// Installs `fd` as the call's result and records it as served with `snap`.
long SnapshotServer::send(const seccomp_notif& req, int fd_to_send, uint64_t flags, size_t abs_len,
                          const Snapshot& snap, int32_t record) {
  long fd = install(req, fd_to_send, flags, abs_len);
  if (fd == -EACCES) return -EACCES;
  if (fd < 0) return kAnswered;  // the call is gone (interrupted): nothing to answer
  arena_->append(record, reinterpret_cast<const char*>(&snap), sizeof snap, absolute_.data(),
                 static_cast<uint32_t>(abs_len));
  return kAnswered;
}

// Installs `fd` as the call's result: the new descriptor, -EACCES where
// the kernel cannot (recorded as refused), another negative where the call
// is gone.
long SnapshotServer::install(const seccomp_notif& req, int fd_to_send, uint64_t flags,
                             size_t abs_len) {
  seccomp_notif_addfd add{};
  add.id = req.id;
  add.flags = SECCOMP_ADDFD_FLAG_SEND;
  add.srcfd = static_cast<uint32_t>(fd_to_send);
  add.newfd_flags = static_cast<uint32_t>(flags & O_CLOEXEC);
  long fd = raw_syscall(SYS_ioctl, listener_, static_cast<long>(SECCOMP_IOCTL_NOTIF_ADDFD),
                        reinterpret_cast<long>(&add));
  if (fd == -EINVAL || fd == -ENOTTY) {
    arena_->append_refused("not servable: the kernel has no SECCOMP_ADDFD_FLAG_SEND (Linux 5.14+)",
                           absolute_.data(), abs_len);
    return -EACCES;
  }
  return fd;
}

// Beneath one of the policy's folders (NVRTC's own: its libraries, the
// time zone, its PCH folder): Landlock lets it read those itself.
bool SnapshotServer::own(const char* path, size_t len) const {
  auto beneath = [&](std::string_view d) { return lies_in(std::string_view(path, len), d); };
  for (const std::string& d : policy_.readable) {
    if (beneath(d)) return true;
  }
  for (const std::string& d : policy_.writable) {
    if (beneath(d)) return true;
  }
  // What the process reads by itself (kProcessFiles): Landlock refuses
  // it, as without serving.
  for (const char* file : kProcessFiles) {
    if (beneath(file)) return true;
  }
  return false;
}

// Whether a name beneath NVRTC's own folders leads to a file there too (or
// to nothing): Landlock judges the file a link leads to, so a link there to
// a user's header is served, as the kernel would not let NVRTC read it (a
// review: `__has_include` of such a link was false, NVRTC alone says true).
bool SnapshotServer::leads_to_own(const char* absolute) {
  long fd = raw_syscall(SYS_openat, AT_FDCWD, reinterpret_cast<long>(absolute),
                        static_cast<long>(O_PATH | O_CLOEXEC));
  if (fd < 0) return true;  // nothing there: the kernel answers as it would
  size_t len = folder_of_fd(static_cast<int>(fd), resolved_.data());
  raw_syscall(SYS_close, fd);
  return len == 0 || own(resolved_.data(), len);
}

// The kernel's pseudo-files: their bytes are made as they are read, no
// snapshot of a file.
bool SnapshotServer::pseudo(const char* path, size_t len) {
  for (const char* folder :
       {"/proc", "/sys", "/dev/fd", "/dev/stdin", "/dev/stdout", "/dev/stderr"}) {
    size_t n = std::strlen(folder);
    if (len >= n && std::memcmp(path, folder, n) == 0 && (len == n || path[n] == '/')) {
      return true;
    }
  }
  return false;
}

}  // namespace kcache::compiler::seal
