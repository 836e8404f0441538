// Follows the supervisor's rule (supervisor.h) from run() on.
#include "compiler/seal/supervisor.h"

#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <poll.h>
#include <sys/auxv.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "compiler/seal/kernel_setup.h"
#include "compiler/seal/raw_calls.h"

namespace kcache::compiler::seal {

LoaderCode find_loader_code() {
  LoaderCode code;
  const uint64_t base = ::getauxval(AT_BASE);
  if (base == 0) return code;  // linked statically: no loader
  struct Seen {
    uint64_t base;
    LoaderCode* code;
  } seen{base, &code};
  ::dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) {
        auto* s = static_cast<Seen*>(data);
        if (info->dlpi_addr != s->base) return 0;
        for (int i = 0; i < info->dlpi_phnum && s->code->count < LoaderCode::kMax; ++i) {
          const ElfW(Phdr)& ph = info->dlpi_phdr[i];
          if (ph.p_type != PT_LOAD || !(ph.p_flags & PF_X)) continue;
          s->code->begin[s->code->count] = info->dlpi_addr + ph.p_vaddr;
          s->code->end[s->code->count] = info->dlpi_addr + ph.p_vaddr + ph.p_memsz;
          ++s->code->count;
        }
        return 1;
      },
      &seen);
  return code;
}

Supervisor::Supervisor(int listener, const Goodbye& goodbye, RecordArena* arena,
                       const SealPolicy& policy, int cwd_fd, const std::string& cwd,
                       const LoaderCode& loader, CpuKeeper* keeper, const std::atomic<bool>* joined,
                       SnapshotCache* known)
    : listener_(listener),
      goodbye_(goodbye),
      arena_(arena),
      policy_(policy),
      loader_(loader),
      keeper_(keeper),
      joined_(joined),
      server_(listener, arena, policy, cwd_fd, cwd, known) {
  // The kernel's sizes where it says them (a newer kernel's may be
  // larger), else these headers': never none, or the sealed thread's
  // first path call would wait for good.
  seccomp_notif_sizes sizes{};
  if (::syscall(SYS_seccomp, SECCOMP_GET_NOTIF_SIZES, 0, &sizes) != 0) sizes = {};
  req_.resize(std::max<size_t>(sizes.seccomp_notif, sizeof(seccomp_notif)));
  resp_.resize(std::max<size_t>(sizes.seccomp_notif_resp, sizeof(seccomp_notif_resp)));
  path_.resize(kMaxPath + 1);
  base_.resize(kMaxPath + 1);
  pid_ = ::getpid();
}

void Supervisor::run() {
  keeper_->enter();
  auto* req = reinterpret_cast<seccomp_notif*>(req_.data());
  auto* resp = reinterpret_cast<seccomp_notif_resp*>(resp_.data());
  bool said_goodbye = false;
  int idle_after_join = 0;  // 100 ms polls with nothing to answer, the sealed thread joined
  for (;;) {
    // After the goodbye the thread still ends (glibc's thread exit may
    // trim a heap, which opens a file): answer until the filter goes away
    // with it (POLLHUP), which only poll() sees. A thread or process `fn`
    // started that lives on keeps the filter: after kStragglerPolls with
    // nothing to answer, the seal gives up on it (SealResult: not sealed).
    if (said_goodbye) {
      pollfd p{listener_, POLLIN, 0};
      long r = raw_syscall(SYS_poll, reinterpret_cast<long>(&p), 1, 100);
      if (r == -EINTR) continue;
      if (r < 0 || (r > 0 && !(p.revents & POLLIN))) return;
      if (r == 0) {
        if (joined_->load() && ++idle_after_join >= kStragglerPolls) {
          outlived_ = true;
          return;
        }
        continue;
      }
    }
    std::memset(req_.data(), 0, req_.size());
    // Until the goodbye, blocks here: the kernel hands the CPU straight
    // over (SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP).
    long r = raw_syscall(SYS_ioctl, listener_, static_cast<long>(SECCOMP_IOCTL_NOTIF_RECV),
                         reinterpret_cast<long>(req));
    if (r == -EINTR || r == -ENOENT) {
      // ENOENT: the caller was killed meanwhile, or (Linux 6.11+) no
      // thread uses the filter any more: then it has hung up.
      pollfd p{listener_, POLLIN, 0};
      if (raw_syscall(SYS_poll, reinterpret_cast<long>(&p), 1, 0) > 0 && !(p.revents & POLLIN))
        return;
      continue;
    }
    if (r != 0) return;
    // (A goodbye made again after its answer, a signal racing it, is
    // answered again and never recorded.)
    const bool goodbye = is_goodbye(req->data);
    if (!said_goodbye && !goodbye) keeper_->judge(static_cast<long>(req->pid));
    // Serving, the loader's calls are its own: neither recorded nor
    // served (Landlock judges them).
    const bool loader = !goodbye && policy_.serve && from_loader(req->data.instruction_pointer);
    // The path record() read, in path_, for serve() to use again.
    bool at = false;
    const size_t path_len = goodbye || loader ? 0 : record(req->data, &at);
    long answer = goodbye ? -EBADF
                  : policy_.serve && !loader
                      ? (server_.hides(req->data, at, path_.data(), path_len)
                             ? -ENOENT
                             : server_.serve(*req, path_.data(), path_len))
                      : SnapshotServer::kContinue;
    if (answer == SnapshotServer::kAnswered) continue;
    std::memset(resp_.data(), 0, resp_.size());
    resp->id = req->id;
    if (answer == SnapshotServer::kContinue) {
      resp->flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE;
    } else {
      resp->error = static_cast<int32_t>(answer);  // -errno
    }
    long sent = raw_syscall(SYS_ioctl, listener_, static_cast<long>(SECCOMP_IOCTL_NOTIF_SEND),
                            reinterpret_cast<long>(resp));
    // A goodbye a signal interrupted (ENOENT) is made again.
    if (goodbye && sent == 0) said_goodbye = true;
  }
}

// A call made by the dynamic loader (its code made it): a library search
// (NVRTC's try for libcuda), never an include. Landlock judges it.
bool Supervisor::from_loader(uint64_t ip) const {
  for (size_t i = 0; i < loader_.count; ++i) {
    if (ip >= loader_.begin[i] && ip < loader_.end[i]) return true;
  }
  return false;
}

// Whether `d` is the sealed thread's goodbye: kGoodbyeFd, and this run's
// token at the path's address.
bool Supervisor::is_goodbye(const seccomp_data& d) const {
  if (d.nr != SYS_openat || static_cast<int>(d.args[0]) != kGoodbyeFd) return false;
  Goodbye said{};
  iovec local{&said, sizeof said};
  iovec remote{reinterpret_cast<void*>(d.args[1]), sizeof said};
  return raw_syscall(SYS_process_vm_readv, pid_, reinterpret_cast<long>(&local), 1,
                     reinterpret_cast<long>(&remote), 1, 0) == sizeof said &&
         std::memcmp(said.token, goodbye_.token, sizeof said.token) == 0;
}

// Records the call's path; returns its length (it stays in path_), 0 for
// none; `at`: the call's first argument is a folder descriptor.
size_t Supervisor::record(const seccomp_data& d, bool* at) {
  for (const PathCall& c : kPathCalls) {
    if (c.nr != d.nr) continue;
    *at = c.at;
    size_t path_len = read_path(pid_, d.args[c.path_arg], path_.data());
    if (path_len == 0) return 0;  // fstat(fd) and friends name no path
    size_t base_len = 0;
    if (c.at && path_[0] != '/' && static_cast<int>(d.args[0]) != AT_FDCWD) {
      base_len = folder_of_fd(static_cast<int>(d.args[0]), base_.data());
      // Unknown: never taken for the working folder's (probes_of), and
      // no path a lookup can check.
      if (base_len == 0) base_[base_len++] = '?';
    }
    arena_->append(d.nr, base_.data(), static_cast<uint32_t>(base_len), path_.data(),
                   static_cast<uint32_t>(path_len));
    return path_len;
  }
  return 0;
}

}  // namespace kcache::compiler::seal
