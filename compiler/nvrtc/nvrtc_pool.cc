#include "compiler/nvrtc/nvrtc_pool.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <cerrno>
#include <iterator>
#include <thread>

#include "common/error.h"
#include "common/file_system.h"
#include "compiler/nvrtc/nvrtc_worker.h"

extern char** environ;

namespace kcache::compiler {

struct NvrtcPool::Child {
  pid_t pid = -1;
  int to = -1;      // its stdin (a socket: writes never raise SIGPIPE)
  int from = -1;    // its stdout
  std::string key;  // the options it compiled with last (its PCH's)

  // Closes its stdin (the child exits at EOF) and reaps it; `kill` first
  // when it may be stuck or broken.
  void stop(bool kill) {
    if (to >= 0) ::close(to);
    if (from >= 0) ::close(from);
    to = from = -1;
    if (pid > 0) {
      if (kill) ::kill(pid, SIGKILL);
      int status;
      while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
      }
    }
    pid = -1;
  }
  int reap() {  // after a broken exchange: its wait status
    ::kill(pid, SIGKILL);
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    pid = -1;
    return status;
  }
};

NvrtcPool::NvrtcPool(std::vector<std::string> argv, std::string scratch, int max_children)
    : argv_(std::move(argv)),
      scratch_(std::move(scratch)),
      owner_(::getpid()),
      max_children_(max_children > 0
                        ? max_children
                        : std::max(4, static_cast<int>(std::thread::hardware_concurrency()))) {}

NvrtcPool::~NvrtcPool() {
  for (auto& c : idle_) c->stop(/*kill=*/false);
}

int NvrtcPool::started() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return started_;
}

std::unique_ptr<NvrtcPool::Child> NvrtcPool::take(const std::string& key) {
  int n;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (::getpid() != owner_) forget_the_parents_children();
    if (std::unique_ptr<Child> c = take_idle(key)) return c;
    n = started_++;
    ++live_;
  }
  try {
    return start_child(n, key);
  } catch (...) {
    std::lock_guard<std::mutex> lock(mutex_);
    --live_;
    throw;
  }
}

// This is a fork() of the process that started the children: they answer
// the parent, whose frames would mix with ours. Forget them (closing our
// copies only: neither killed nor waited for, they are not our children) and
// start our own. Under mutex_.
void NvrtcPool::forget_the_parents_children() {
  for (auto& c : idle_) {
    ::close(c->to);
    ::close(c->from);
    c->to = c->from = -1;
    c->pid = -1;
  }
  idle_.clear();
  live_ = 0;
  owner_ = ::getpid();
}

// An idle child that last compiled with `key`, else (all children live) the
// one idle the longest, else null. Under mutex_.
std::unique_ptr<NvrtcPool::Child> NvrtcPool::take_idle(const std::string& key) {
  // idle_ is ordered from the least recently used.
  auto match = std::find_if(idle_.rbegin(), idle_.rend(),
                            [&](const std::unique_ptr<Child>& c) { return c->key == key; });
  if (match == idle_.rend() && live_ >= max_children_ && !idle_.empty()) {
    match = std::prev(idle_.rend());  // the oldest
  }
  if (match == idle_.rend()) return nullptr;
  std::unique_ptr<Child> c = std::move(*match);
  idle_.erase(std::next(match).base());
  c->key = key;
  return c;
}

namespace {

// Starts `args` in `cwd` with `in` as its stdin and `out` as its stdout.
// The child is kcache's own process, not a copy of this one's state: every
// signal at its default and none blocked (a host may block or ignore some),
// a process group of its own (a terminal's Ctrl-C is for the program, which
// decides), and no LD_PRELOAD (kcache run preloads the drop-in into the
// program, not into kcache). $PWD names the child's own working folder
// (NVRTC looks at it), not the folder of whatever started it. Returns
// posix_spawn's error, 0 on success.
int spawn_worker(std::vector<std::string> args, const std::string& cwd, int in, int out,
                 pid_t* pid) {
  std::vector<char*> cargs;
  for (std::string& a : args) cargs.push_back(&a[0]);
  cargs.push_back(nullptr);
  std::string pwd = "PWD=" + cwd;
  std::vector<char*> env;
  for (char** e = environ; e && *e; ++e) {
    if (std::strncmp(*e, "LD_PRELOAD=", 11) != 0 && std::strncmp(*e, "PWD=", 4) != 0) {
      env.push_back(*e);
    }
  }
  env.push_back(&pwd[0]);
  env.push_back(nullptr);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none, all;
  sigemptyset(&none);
  sigfillset(&all);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &all);
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF |
                                      POSIX_SPAWN_SETPGROUP);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, in, 0);
  posix_spawn_file_actions_adddup2(&actions, out, 1);
  posix_spawn_file_actions_addchdir_np(&actions, cwd.c_str());
  int rc = ::posix_spawn(pid, cargs[0], &actions, &attr, cargs.data(), env.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  return rc;
}

}  // namespace

// The pool's child number `n`: with a scratch folder, an empty working
// folder and a PCH folder of its own there; without one, no folder and no PCH.
std::unique_ptr<NvrtcPool::Child> NvrtcPool::start_child(int n, const std::string& key) {
  std::vector<std::string> args = argv_;
  args.push_back("--loop");
  std::string cwd = "/";
  if (!scratch_.empty()) {
    std::string home = scratch_ + "/nvrtc-" + std::to_string(n);
    for (const std::string& d : {home, home + "/cwd", home + "/pch"}) {
      if (::mkdir(d.c_str(), 0700) != 0 && errno != EEXIST) {
        throw IoError(errno_message("cannot create the NVRTC worker's folder", d, errno));
      }
    }
    args.insert(args.end(), {"--pch-dir", home + "/pch"});
    cwd = home + "/cwd";
  }
  int in[2], out[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, in) != 0) {
    throw IoError(errno_message("cannot create a socket pair", "", errno));
  }
  if (::pipe2(out, O_CLOEXEC) != 0) {
    int err = errno;
    ::close(in[0]);
    ::close(in[1]);
    throw IoError(errno_message("cannot create a pipe", "", err));
  }
  auto c = std::make_unique<Child>();
  int rc = spawn_worker(std::move(args), cwd, in[0], out[1], &c->pid);
  ::close(in[0]);
  ::close(out[1]);
  if (rc != 0) {
    ::close(in[1]);
    ::close(out[0]);
    throw IoError(errno_message("cannot start the NVRTC worker", argv_[0], rc));
  }
  c->to = in[1];
  c->from = out[0];
  c->key = key;
  return c;
}

void NvrtcPool::give_back(std::unique_ptr<Child> child) {
  std::lock_guard<std::mutex> lock(mutex_);
  idle_.push_back(std::move(child));
}

void NvrtcPool::retire(std::unique_ptr<Child> child) {
  child->stop(/*kill=*/true);
  std::lock_guard<std::mutex> lock(mutex_);
  --live_;
}

NvrtcOutput NvrtcPool::compile(const std::string& nvrtc_path, const NvrtcInput& input) {
  std::string key;
  for (const std::string& o : input.options) key += o + '\n';
  std::unique_ptr<Child> child = take(key);
  std::string response;
  if (!write_frame(child->to, encode_worker_request(nvrtc_path, input), /*socket=*/true) ||
      read_frame(child->from, response) != Frame::ok) {
    // It died (NVRTC crashed, out of memory) or broke the framing: this
    // compile fails with what happened; the next one starts a new child.
    int status = child->reap();
    retire(std::move(child));
    ++deaths_in_a_row_;
    return decode_worker_response("", status, input);  // throws, naming the signal
  }
  try {
    NvrtcOutput out = decode_worker_response(response, 0, input);
    deaths_in_a_row_ = 0;
    give_back(std::move(child));
    return out;
  } catch (const CompileError&) {
    deaths_in_a_row_ = 0;
    give_back(std::move(child));  // a wrong source: the child is fine
    throw;
  } catch (...) {
    retire(std::move(child));
    throw;
  }
}

}  // namespace kcache::compiler
