// A host program that sets up hostile process state around NVRTC compiles
// (signals, limits, descriptors, children, threads, fork, exit), for
// host_attack_test: run once with the real NVRTC and twice with the drop-in
// (a miss, then a hit). Writes each compile's answers to OUT_DIR
// (TAG.codes, TAG.ptx, TAG.log) and what it found wrong with its own state
// to OUT_DIR/state (one line per problem; empty when all is well).
//
//   host_attacker CASE OUT_DIR WORK_DIR
#include <nvrtc.h>

#include <dirent.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace {

std::string out_dir, work_dir;
std::mutex state_mutex;
std::string state_problems;

void problem(const std::string& what) {
  std::lock_guard<std::mutex> lock(state_mutex);
  state_problems += what + "\n";
}

void write(const std::string& name, const std::string& bytes) {
  std::ofstream(out_dir + "/" + name, std::ios::binary) << bytes;
}

std::string kernel(const std::string& name, int value) {
  return "__global__ void " + name + "(int* p) { p[0] = " + std::to_string(value) + "; }\n";
}

// A kernel NVRTC takes a while over (for races with a running compile).
std::string slow_kernel(const std::string& name, int n) {
  std::string s;
  for (int i = 0; i < n; ++i) {
    s += "template <int N> struct S" + std::to_string(i) +
         " { static __device__ int f(int x) { return x * N + " + std::to_string(i) + "; } };\n";
  }
  s += "__global__ void " + name + "(int* p) { int v = p[0];\n";
  for (int i = 0; i < n; ++i) {
    s += "  v = S" + std::to_string(i) + "<" + std::to_string(i + 3) + ">::f(v);\n";
  }
  s += "  p[0] = v; }\n";
  return s;
}

// Compiles one program and writes every answer under `tag`.
nvrtcResult compile(const std::string& tag, const std::string& source, const char* name,
                    std::vector<std::string> options = {"-arch=compute_80"}) {
  std::vector<const char*> opts;
  for (const std::string& o : options) opts.push_back(o.c_str());
  std::ostringstream codes;
  nvrtcProgram prog = nullptr;
  codes << "create " << nvrtcCreateProgram(&prog, source.c_str(), name, 0, nullptr, nullptr)
        << "\n";
  nvrtcResult result = nvrtcCompileProgram(prog, static_cast<int>(opts.size()), opts.data());
  codes << "compile " << result << "\n";
  size_t size = 0;
  nvrtcResult r = nvrtcGetProgramLogSize(prog, &size);
  codes << "log " << r << " " << size << "\n";
  if (r == NVRTC_SUCCESS) {
    std::string log(size, '\0');
    codes << "log_bytes " << nvrtcGetProgramLog(prog, &log[0]) << "\n";
    write(tag + ".log", log);
  }
  r = nvrtcGetPTXSize(prog, &size);
  codes << "ptx " << r << " " << (r == NVRTC_SUCCESS ? size : 0) << "\n";
  if (r == NVRTC_SUCCESS && size) {
    std::string ptx(size, '\0');
    codes << "ptx_bytes " << nvrtcGetPTX(prog, &ptx[0]) << "\n";
    write(tag + ".ptx", ptx);
  }
  codes << "destroy " << nvrtcDestroyProgram(&prog) << "\n";
  write(tag + ".codes", codes.str());
  return result;
}

std::string sigaction_of(int sig) {
  struct sigaction sa;
  ::sigaction(sig, nullptr, &sa);
  std::ostringstream s;
  s << reinterpret_cast<void*>(sa.sa_handler) << "/" << sa.sa_flags;
  return s.str();
}

std::string all_dispositions() {
  std::string s;
  for (int sig = 1; sig < NSIG; ++sig) {
    if (sig == SIGKILL || sig == SIGSTOP) continue;
    s += std::to_string(sig) + ":" + sigaction_of(sig) + " ";
  }
  return s;
}

std::string mask_of_thread() {
  sigset_t m;
  ::pthread_sigmask(SIG_SETMASK, nullptr, &m);
  std::string s;
  for (int sig = 1; sig < NSIG; ++sig) s += sigismember(&m, sig) ? '1' : '0';
  return s;
}

// Descriptors of this process and what they are.
std::vector<std::pair<int, std::string>> open_fds() {
  std::vector<std::pair<int, std::string>> out;
  DIR* d = ::opendir("/proc/self/fd");
  if (!d) return out;
  int self = ::dirfd(d);
  while (dirent* e = ::readdir(d)) {
    if (e->d_name[0] == '.') continue;
    int fd = std::atoi(e->d_name);
    if (fd == self) continue;
    char target[4096];
    ssize_t n = ::readlink((std::string("/proc/self/fd/") + e->d_name).c_str(), target,
                           sizeof target - 1);
    out.emplace_back(fd, n > 0 ? std::string(target, n) : "?");
  }
  ::closedir(d);
  return out;
}

// This process's children (every thread's), from /proc.
std::vector<pid_t> children() {
  std::vector<pid_t> out;
  DIR* d = ::opendir("/proc/self/task");
  if (!d) return out;
  while (dirent* e = ::readdir(d)) {
    if (e->d_name[0] == '.') continue;
    std::ifstream in(std::string("/proc/self/task/") + e->d_name + "/children");
    pid_t p;
    while (in >> p) out.push_back(p);
  }
  ::closedir(d);
  return out;
}

// kcache's compile processes (`__nvrtc-worker`) started for this host run:
// not this process's children (init adopts them), found by the test's mark
// in their environment.
std::vector<pid_t> compile_processes() {
  std::vector<pid_t> out;
  const char* mark = ::getenv("HOST_ATTACK_MARK");
  DIR* d = ::opendir("/proc");
  if (!d || !mark) return out;
  while (dirent* e = ::readdir(d)) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    std::string dir = std::string("/proc/") + e->d_name;
    std::ifstream env_in(dir + "/environ"), cmd_in(dir + "/cmdline");
    std::string env((std::istreambuf_iterator<char>(env_in)), std::istreambuf_iterator<char>());
    std::string cmd((std::istreambuf_iterator<char>(cmd_in)), std::istreambuf_iterator<char>());
    if (env.find(std::string("HOST_ATTACK_MARK=") + mark) != std::string::npos &&
        cmd.find("__nvrtc-worker") != std::string::npos) {
      out.push_back(static_cast<pid_t>(std::atoi(e->d_name)));
    }
  }
  ::closedir(d);
  return out;
}

// Whether `pid` has ended (gone, or a zombie).
bool ended(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  size_t close = stat.rfind(')');
  return stat.empty() || (close != std::string::npos && close + 2 < stat.size() && stat[close + 2] == 'Z');
}

// Forks a child that outlives this process (as daemon(3) leaves one), and
// returns in the parent. The child waits for the parent to end, then for
// `workers` (kcache's compile processes) to end; if they do not within 3 s it
// notes so in the state file and stays 8 s more, so the test's check for
// processes left sees it too.
int fork_a_daemon_that_checks(const std::vector<pid_t>& workers) {
  const pid_t parent = ::getpid();
  std::fflush(nullptr);
  pid_t child = ::fork();
  if (child != 0) return child > 0 ? 0 : 1;
  for (int i = 0; i < 250 && ::getppid() == parent; ++i) ::usleep(20 * 1000);
  bool all_ended = false;
  for (int i = 0; i < 150 && !all_ended; ++i) {
    all_ended = true;
    for (pid_t w : workers) all_ended = all_ended && ended(w);
    if (!all_ended) ::usleep(20 * 1000);
  }
  if (!all_ended) {
    std::ofstream(out_dir + "/state", std::ios::app)
        << "a compile process still ran 3 s after the program ended, held by its forked child\n";
    ::sleep(8);
  }
  ::_exit(0);
}

int thread_count() {
  int n = 0;
  DIR* d = ::opendir("/proc/self/task");
  while (dirent* e = ::readdir(d)) n += e->d_name[0] != '.';
  ::closedir(d);
  return n;
}

// ---- Cases ------------------------------------------------------------------

std::atomic<int> foreign_reaped{0};
std::atomic<pid_t> own_child{0};
std::atomic<int> sigsys_seen{0};

void reap_everything(int) {
  int saved = errno;
  pid_t p;
  int status;
  while ((p = ::waitpid(-1, &status, WNOHANG)) > 0) {
    if (p != own_child.load()) foreign_reaped.fetch_add(1);
  }
  errno = saved;
}

void on_sigsys(int) { sigsys_seen.fetch_add(1); }

void two_compiles(const std::string& prefix) {
  compile(prefix + "a", kernel("ka", 1), "a.cu");
  compile(prefix + "b", kernel("kb", 2), "b.cu");
  compile(prefix + "broken", "__global__ void broken() { undeclared(); }\n", "broken.cu");
}

// Forks a child that compiles one program (TAG<n>, kernel KERNEL_TAG n) and
// exits; waits for it at most a minute. A child that hangs or fails is a
// problem of the host's state.
void fork_a_compiling_child(int n, const std::string& tag, const std::string& kernel_tag) {
  pid_t c = ::fork();
  if (c == 0) {
    ::alarm(60);
    nvrtcResult r = compile(tag + std::to_string(n), kernel(kernel_tag, n), (kernel_tag + ".cu").c_str());
    ::_exit(r == NVRTC_SUCCESS ? 0 : 1);
  }
  int status = 0;
  pid_t got = 0;
  for (int i = 0; i < 600 && got == 0; ++i) {
    got = ::waitpid(c, &status, WNOHANG);
    if (got == 0) ::usleep(100 * 1000);
  }
  if (got == 0) {
    ::kill(c, SIGKILL);
    ::waitpid(c, &status, 0);
    problem("forked child " + std::to_string(n) + " hung compiling");
  } else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    problem("forked child " + std::to_string(n) + " ended with status " + std::to_string(status));
  }
}

// The forked children's answers, moved out of the compared folder.
void keep_apart(const std::string& tag, int children) {
  for (int i = 0; i < children; ++i) {
    for (const char* ext : {".ptx", ".codes", ".log"}) {
      const std::string file = tag + std::to_string(i) + ext;
      std::rename((out_dir + "/" + file).c_str(), (work_dir + "/" + file).c_str());
    }
  }
}

// ---- What the host holds of kcache's (thin_client_test) ---------------------

// The bytes a host writes into each of its own files.
std::string own_bytes(int i) {
  std::string s;
  for (int k = 0; k < 64 * 1024; ++k) s += static_cast<char>('a' + (k + i) % 26);
  return s;
}

// Refuses seccomp() and Landlock's calls with EPERM in this process and
// every process it starts, as a program's own sandbox may.
bool refuse_seccomp_and_landlock() {
  sock_filter code[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_seccomp, 3, 0),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 444, 2, 0),  // landlock_create_ruleset
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 445, 1, 0),  // landlock_add_rule
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 446, 0, 1),  // landlock_restrict_self
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  sock_fprog prog{static_cast<unsigned short>(std::size(code)), code};
  return ::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 &&
         ::syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) == 0;
}

// Stops every compile process of this run after `after_ms` (a debugger, a
// cgroup freezer) and returns them, for the caller to continue.
std::vector<pid_t> stop_compile_processes(int after_ms) {
  ::usleep(after_ms * 1000);
  std::vector<pid_t> stopped = compile_processes();
  for (pid_t p : stopped) ::kill(p, SIGSTOP);
  return stopped;
}

// Returns -1 for a name that is not one of these cases.
int thin_client_case(const std::string& name) {
  if (name == "host_files_after_miss") {
    // A daemon's start: a compile, every descriptor it did not open
    // closed, its own files opened (taking the lowest numbers) and
    // written, then exit(): every exit handler runs with them open.
    compile("a", kernel("ka", 1), "a.cu");
    ::syscall(SYS_close_range, 3u, ~0u, 0u);
    for (int i = 0; i < 8; ++i) {
      int fd = ::open((work_dir + "/own" + std::to_string(i)).c_str(),
                      O_RDWR | O_CREAT | O_TRUNC, 0644);
      const std::string bytes = own_bytes(i);
      if (fd < 0 || ::write(fd, bytes.data(), bytes.size()) != static_cast<ssize_t>(bytes.size())) {
        problem("cannot write own file " + std::to_string(i));
      }
    }
    return 0;
  }
  if (name == "no_store_files_open") {
    // A miss, a hit of the same program, a failed compile: no file of the
    // store is open in this process afterwards.
    two_compiles("");
    compile("again", kernel("ka", 1), "a.cu");
    const char* store = std::getenv("KCACHE_DIR");
    char real[4096];
    std::string folder = store && ::realpath(store, real) ? real : "(no store)";
    for (auto& [fd, what] : open_fds()) {
      if (what.rfind(folder + "/", 0) == 0 || what.find("sqlite") != std::string::npos) {
        problem("the host holds a store file: fd " + std::to_string(fd) + " " + what);
      }
    }
    return 0;
  }
  if (name == "stopped_compile_process") {
    // Its compile processes stopped while it compiles: the host still gets
    // an answer, and continues them afterwards (a debugger detaching).
    compile("warm", kernel("warm", 1), "warm.cu");
    std::vector<pid_t> stopped;
    std::thread stopper([&stopped] { stopped = stop_compile_processes(300); });
    compile("slow", slow_kernel("slow", 3000), "slow.cu");
    stopper.join();
    for (pid_t p : stopped) ::kill(p, SIGCONT);
    compile("after", kernel("after", 2), "after.cu");
    return 0;
  }
  if (name == "seccomp_refuses_seal") {
    if (!refuse_seccomp_and_landlock()) problem("cannot install the seccomp filter");
    two_compiles("");
    return 0;
  }
  if (name == "one_compile") {
    compile("one", kernel("kone", 1), "one.cu");
    return 0;
  }
  if (name == "threads8_unusable_store") {
    // A store that no compile process can open (KCACHE_DIR names a file),
    // met by 8 threads at once: by several compile processes, each of
    // which meets it.
    const std::string not_a_folder = work_dir + "/not_a_store";
    int fd = ::open(not_a_folder.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) problem("cannot create " + not_a_folder);
    ::close(fd);
    ::setenv("KCACHE_DIR", not_a_folder.c_str(), 1);
    std::vector<std::thread> ts;
    for (int t = 0; t < 8; ++t) {
      ts.emplace_back([t] {
        for (int i = 0; i < 2; ++i) {
          const std::string tag = "s" + std::to_string(t) + "_" + std::to_string(i);
          compile(tag, kernel("k" + tag, t), "s.cu");
        }
      });
    }
    for (auto& th : ts) th.join();
    return 0;
  }
  if (name == "threads8_no_compile_process") {
    // Compile processes that never start (a KCACHE_EXE that exits at once),
    // met by 8 threads at once.
    ::setenv("KCACHE_EXE", "/bin/true", 1);
    std::vector<std::thread> ts;
    for (int t = 0; t < 8; ++t) {
      ts.emplace_back([t] {
        for (int i = 0; i < 3; ++i) {
          const std::string tag = "t" + std::to_string(t) + "_" + std::to_string(i);
          compile(tag, kernel("k" + tag, t), "t.cu");
        }
      });
    }
    for (auto& th : ts) th.join();
    return 0;
  }
  return -1;
}

int run_case(const std::string& name) {
  if (name == "plain") {
    std::string before = all_dispositions();
    mode_t um = ::umask(022);
    ::umask(um);
    int threads = thread_count();
    two_compiles("");
    std::string after = all_dispositions();
    if (after != before) {
      // Which ones (the real NVRTC's own changes are the reference).
      std::istringstream b(before), a(after);
      std::string x, y;
      while (b >> x && a >> y) {
        if (x != y) problem("signal disposition changed: " + x + " -> " + y);
      }
    }
    mode_t um2 = ::umask(022);
    ::umask(um2);
    if (um2 != um) problem("umask changed");
    if (thread_count() != threads) problem("threads: " + std::to_string(threads) + " -> " +
                                           std::to_string(thread_count()));
    return 0;
  }
  if (name == "sigchld_ignored") {
    ::signal(SIGCHLD, SIG_IGN);
    two_compiles("");
    if (sigaction_of(SIGCHLD) != sigaction_of(SIGCHLD) ||
        reinterpret_cast<void*>(::signal(SIGCHLD, SIG_IGN)) != reinterpret_cast<void*>(SIG_IGN)) {
      problem("SIGCHLD no longer ignored");
    }
    return 0;
  }
  if (name == "sigchld_reaper") {
    // A host that reaps every child in its SIGCHLD handler, and forks its own.
    struct sigaction sa = {};
    sa.sa_handler = reap_everything;
    sa.sa_flags = SA_RESTART | SA_NOCLDSTOP;
    ::sigaction(SIGCHLD, &sa, nullptr);
    compile("a", kernel("ka", 1), "a.cu");
    sigset_t chld, old;
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    ::pthread_sigmask(SIG_BLOCK, &chld, &old);
    pid_t c = ::fork();
    if (c == 0) ::_exit(0);
    own_child = c;
    ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
    compile("b", kernel("kb", 2), "b.cu");
    compile("broken", "__global__ void broken() { undeclared(); }\n", "broken.cu");
    ::usleep(200 * 1000);
    if (foreign_reaped.load()) {
      problem("the host's SIGCHLD handler reaped " + std::to_string(foreign_reaped.load()) +
              " processes it did not start");
    }
    return 0;
  }
  if (name == "wait_for_all_children") {
    // A host that starts one child, compiles, then waits for all its
    // children (`while (wait(&s) > 0)`): it must come back once its own child
    // has ended.
    pid_t c = ::fork();
    if (c == 0) ::_exit(7);
    compile("a", kernel("ka", 1), "a.cu");
    compile("b", kernel("kb", 2), "b.cu");
    std::atomic<bool> done{false};
    std::thread watchdog([&] {
      for (int i = 0; i < 200 && !done; ++i) ::usleep(50 * 1000);
      if (!done) {
        problem("wait() for all children did not return within 10 s (children: " +
                std::to_string(children().size()) + ")");
        std::ofstream(out_dir + "/state") << state_problems;
        ::_exit(3);
      }
    });
    int status, reaped_own = 0, reaped_other = 0;
    pid_t p;
    while ((p = ::wait(&status)) > 0) (p == c ? reaped_own : reaped_other)++;
    done = true;
    watchdog.join();
    if (reaped_own != 1) problem("own child not reaped");
    if (reaped_other) problem("wait() reaped " + std::to_string(reaped_other) + " foreign children");
    return 0;
  }
  if (name == "no_children_after_compile") {
    compile("a", kernel("ka", 1), "a.cu");
    errno = 0;
    int status;
    pid_t p = ::waitpid(-1, &status, WNOHANG);
    if (!(p == -1 && errno == ECHILD)) {
      problem("a host that started no child has children after a compile: waitpid(-1, WNOHANG) = " +
              std::to_string(p) + ", children " + std::to_string(children().size()));
    }
    return 0;
  }
  if (name == "all_signals_blocked") {
    sigset_t all;
    sigfillset(&all);
    ::pthread_sigmask(SIG_BLOCK, &all, nullptr);
    std::string before = mask_of_thread();
    two_compiles("");
    if (mask_of_thread() != before) problem("signal mask changed");
    return 0;
  }
  if (name == "sigsys_handler") {
    struct sigaction sa = {};
    sa.sa_handler = on_sigsys;
    ::sigaction(SIGSYS, &sa, nullptr);
    std::string before = sigaction_of(SIGSYS);
    two_compiles("");
    if (sigaction_of(SIGSYS) != before) problem("SIGSYS handler changed");
    if (sigsys_seen.load()) problem("SIGSYS delivered to the host");
    return 0;
  }
  if (name == "sigpipe_default") {
    ::signal(SIGPIPE, SIG_DFL);
    two_compiles("");
    return 0;
  }
  if (name == "rlimit_nofile_32") {
    struct rlimit rl = {32, 32};
    if (::setrlimit(RLIMIT_NOFILE, &rl) != 0) problem("setrlimit failed");
    two_compiles("");
    struct rlimit got;
    ::getrlimit(RLIMIT_NOFILE, &got);
    if (got.rlim_cur != 32 || got.rlim_max != 32) problem("RLIMIT_NOFILE changed");
    return 0;
  }
  if (name == "umask_077") {
    ::umask(077);
    two_compiles("");
    mode_t um = ::umask(077);
    if (um != 077) problem("umask changed");
    return 0;
  }
  if (name == "cwd_changes") {
    // The same relative -I and program name in two working folders whose
    // headers differ.
    for (const char* dir : {"one", "two"}) {
      std::string d = work_dir + "/" + dir;
      ::mkdir(d.c_str(), 0755);
      ::mkdir((d + "/inc").c_str(), 0755);
      std::ofstream(d + "/inc/value.h") << "#define VALUE " << (dir[0] == 'o' ? 11 : 22) << "\n";
    }
    const std::string src = "#include \"value.h\"\n__global__ void k(int* p) { p[0] = VALUE; }\n";
    for (const char* dir : {"one", "two", "one"}) {
      if (::chdir((work_dir + "/" + dir).c_str()) != 0) problem("chdir");
      compile(std::string("cwd_") + dir + std::to_string(std::rand() % 1), src, "sub/k.cu",
              {"-arch=compute_80", "-Iinc"});
    }
    char cwd[4096];
    if (!::getcwd(cwd, sizeof cwd) || std::string(cwd) != work_dir + "/one") problem("cwd changed");
    return 0;
  }
  if (name == "std_fds_closed") {
    ::close(0);
    ::close(1);
    ::close(2);
    two_compiles("");
    // fds 0..2 are the host's to reuse; nothing of kcache may sit there
    // unknown to it... but what it opens itself may. Report what is there.
    for (auto& [fd, what] : open_fds()) {
      if (fd <= 2) problem("fd " + std::to_string(fd) + " open after compiles: " + what);
    }
    return 0;
  }
  if (name == "threads8") {
    std::vector<std::thread> ts;
    for (int t = 0; t < 8; ++t) {
      ts.emplace_back([t] {
        if (t < 4) {
          compile("t" + std::to_string(t), kernel("k" + std::to_string(t), t), "t.cu");
        } else {
          compile("t" + std::to_string(t), kernel("same", 42), "same.cu");
        }
      });
    }
    for (auto& th : ts) th.join();
    return 0;
  }
  if (name == "fork_races_compile") {
    // One thread compiles misses while the main thread forks; each child
    // compiles one program and exits.
    std::atomic<bool> stop{false};
    std::thread compiler([&] {
      for (int i = 0; i < 4; ++i) compile("bg" + std::to_string(i), kernel("bg", 100 + i), "bg.cu");
      stop = true;
    });
    int forks = 0;
    while (!stop && forks < 6) {
      ::usleep(150 * 1000);
      fork_a_compiling_child(forks, "child", "ch");
      ++forks;
    }
    compiler.join();
    keep_apart("child", forks);  // how many forks ran varies
    return 0;
  }
  if (name == "fork_during_first_compile") {
    // The host forks while its first compiles run on another thread: kcache
    // making its compiler, a store write, a compile slot or the pool's lock
    // under way in the parent. Each child compiles one program and exits;
    // none may wait for good on a lock only the parent's thread would free.
    std::thread compiler([&] {
      for (int i = 0; i < 3; ++i) compile("fg" + std::to_string(i), kernel("fg", 200 + i), "fg.cu");
    });
    const int at_us[] = {300, 1000, 3000, 8000, 20000, 50000, 120000};
    auto started = std::chrono::steady_clock::now();
    int forks = 0;
    for (int at : at_us) {
      std::this_thread::sleep_until(started + std::chrono::microseconds(at));
      fork_a_compiling_child(forks, "fchild", "fc");
      ++forks;
    }
    compiler.join();
    keep_apart("fchild", forks);
    return 0;
  }
  if (name == "daemon_after_miss") {
    // A review (session 8): a host that compiles, then forks a child that
    // lives on (daemon(3)) and ends. The child kept the pool's ends, so the
    // compile process lived as long as the child and held the caller's
    // pipes.
    compile("d", kernel("d", 7), "d.cu");
    return fork_a_daemon_that_checks(compile_processes());
  }
  if (name == "daemon_during_compile") {
    // The same, forked while another thread is in a compile: the ends that
    // thread holds must close in the child too.
    compile("warm", kernel("warm", 3), "warm.cu");
    std::thread t([] { compile("slowd", slow_kernel("slowd", 3000), "slowd.cu"); });
    ::usleep(300 * 1000);
    int rc = fork_a_daemon_that_checks(compile_processes());
    t.join();
    return rc;
  }
  if (name == "exit_during_compile") {
    // exit() while another thread is in a long compile: the process ends.
    std::thread t([] { compile("slow", slow_kernel("slow", 5000), "slow.cu"); });
    t.detach();
    ::usleep(500 * 1000);
    std::ofstream(out_dir + "/state") << state_problems;
    std::exit(0);
  }
  if (name == "kill_compile_process") {
    // The compile process is SIGKILLed while it compiles (the OOM killer,
    // a stray kill): the host still gets NVRTC's answer.
    compile("warm", kernel("warm", 1), "warm.cu");
    std::atomic<bool> done{false};
    std::thread killer([&] {
      for (int i = 0; i < 40 && !done; ++i) {
        ::usleep(100 * 1000);
        if (i == 3) {
          for (pid_t p : children()) ::kill(p, SIGKILL);
        }
      }
    });
    compile("slow", slow_kernel("slow", 5000), "slow.cu");
    done = true;
    killer.join();
    compile("after", kernel("after", 2), "after.cu");
    return 0;
  }
  if (name == "close_range_then_sockets") {
    // A host that closes every descriptor it does not know of between
    // compiles, then makes its own socket pairs (which take the lowest free
    // numbers). The next compiles must neither write into them nor close them.
    compile("a", kernel("ka", 1), "a.cu");
    ::syscall(SYS_close_range, 3u, ~0u, 0u);
    std::vector<std::pair<int, int>> pairs;
    for (int i = 0; i < 10; ++i) {
      int sv[2];
      if (::socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) break;
      pairs.emplace_back(sv[0], sv[1]);
    }
    std::atomic<bool> done{false};
    std::thread watchdog([&] {
      for (int i = 0; i < 600 && !done; ++i) ::usleep(50 * 1000);
      if (!done) {
        problem("a compile after close_range hung for 30 s");
        std::ofstream(out_dir + "/state") << state_problems;
        ::_exit(3);
      }
    });
    compile("b", kernel("kb", 2), "b.cu");
    compile("c", kernel("kc", 3), "c.cu");
    done = true;
    watchdog.join();
    for (auto [x, y] : pairs) {
      for (int fd : {x, y}) {
        if (::fcntl(fd, F_GETFD) < 0) {
          problem("the host's socket fd " + std::to_string(fd) + " was closed by a compile");
          continue;
        }
        pollfd pfd = {fd, POLLIN, 0};
        if (::poll(&pfd, 1, 0) == 1 && (pfd.revents & POLLIN)) {
          char buf[64];
          ssize_t n = ::recv(fd, buf, sizeof buf, MSG_DONTWAIT);
          problem("the host's socket fd " + std::to_string(fd) + " received " +
                  std::to_string(n) + " bytes it never sent");
        }
      }
    }
    return 0;
  }
  if (name == "store_index_deleted") {
    // The store's index deleted while the program runs (a user cleaning the
    // cache): the store rebuilds it, and the drop-in must go on caching
    // (host_attack_test reads the stats: no compile goes to the real NVRTC).
    compile("a", kernel("ka", 1), "a.cu");
    if (const char* store = std::getenv("KCACHE_DIR")) {
      for (const char* f : {"/index.sqlite", "/index.sqlite-wal", "/index.sqlite-shm"}) {
        ::unlink((std::string(store) + f).c_str());
      }
    }
    compile("b", kernel("kb", 2), "b.cu");
    compile("c", kernel("kc", 3), "c.cu");
    return 0;
  }
  if (name == "dup2_over_pool_fds") {
    // After a miss, the host dup2()s its own file over every descriptor it
    // did not open (as a daemon redirecting "stray" fds to /dev/null would).
    compile("a", kernel("ka", 1), "a.cu");
    std::string mine = work_dir + "/host_file";
    int f = ::open(mine.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0644);
    for (auto& [fd, what] : open_fds()) {
      if (fd > 2 && fd != f) ::dup2(f, fd);
    }
    std::atomic<bool> done{false};
    std::thread watchdog([&] {
      for (int i = 0; i < 600 && !done; ++i) ::usleep(50 * 1000);
      if (!done) {
        problem("a compile after dup2 over kcache's fds hung for 30 s");
        std::ofstream(out_dir + "/state") << state_problems;
        ::_exit(3);
      }
    });
    compile("b", kernel("kb", 2), "b.cu");
    done = true;
    watchdog.join();
    struct stat st;
    if (::fstat(f, &st) != 0) {
      problem("the host's file fd was closed");
    } else if (st.st_size != 0) {
      problem("kcache wrote " + std::to_string(st.st_size) + " bytes into the host's file");
    }
    return 0;
  }

  // ---- attack3 cases --------------------------------------------------------
  if (name == "subreaper_wait_all") {
    // The host is a subreaper itself (documented limit: it adopts the
    // compile processes). Then it waits for all its children, as at exit.
    ::prctl(PR_SET_CHILD_SUBREAPER, 1);
    pid_t c = ::fork();
    if (c == 0) ::_exit(7);
    compile("a", kernel("ka", 1), "a.cu");
    std::atomic<bool> done{false};
    std::thread watchdog([&] {
      for (int i = 0; i < 200 && !done; ++i) ::usleep(50 * 1000);
      if (!done) {
        problem("subreaper: wait() for all children did not return within 10 s (children: " +
                std::to_string(children().size()) + ")");
        std::ofstream(out_dir + "/state") << state_problems;
        ::_exit(3);
      }
    });
    int status, other = 0;
    pid_t p;
    while ((p = ::wait(&status)) > 0) other += p != c;
    done = true;
    watchdog.join();
    // Reaping them is what a subreaper is for (the documented limit): the
    // property held here is that its wait() comes back (compile processes
    // of an orphan-adopting program end after a second idle: NvrtcPool).
    (void)other;
    return 0;
  }
  if (name == "stdio_reopened_during_compile") {
    // Stdio closed; while one thread compiles a slow miss, the main thread
    // daemonizes: /dev/null on 0, 1 and 2. kcache must not close them.
    ::close(0);
    ::close(1);
    ::close(2);
    compile("warm", kernel("warm", 1), "warm.cu");
    std::thread t([] { compile("slow", slow_kernel("slow", 3000), "slow.cu"); });
    ::usleep(300 * 1000);
    int n = ::open("/dev/null", O_RDWR);
    if (n != 0) problem("open(/dev/null) got fd " + std::to_string(n) + ", not 0");
    ::dup2(n, 1);
    ::dup2(n, 2);
    t.join();
    for (int fd = 0; fd < 3; ++fd) {
      if (::fcntl(fd, F_GETFD) < 0) problem("the host's /dev/null on fd " + std::to_string(fd) + " was closed by a compile");
    }
    compile("after", kernel("after", 2), "after.cu");
    for (int fd = 0; fd < 3; ++fd) {
      if (::fcntl(fd, F_GETFD) < 0) problem("after: fd " + std::to_string(fd) + " closed");
    }
    return 0;
  }
  if (name == "dup2_devnull_stdio_between") {
    // Stdio closed at the first compile, /dev/null dup2()ed over 0-2 by the
    // host after it; later compiles (4 threads) must leave them open.
    ::close(0);
    ::close(1);
    ::close(2);
    compile("a", kernel("ka", 1), "a.cu");
    int n = ::open("/dev/null", O_RDWR);
    for (int fd = 0; fd < 3; ++fd) if (n != fd) ::dup2(n, fd);
    std::vector<std::thread> ts;
    for (int t = 0; t < 4; ++t) {
      ts.emplace_back([t] { compile("t" + std::to_string(t), kernel("kt" + std::to_string(t), t), "t.cu"); });
    }
    for (auto& th : ts) th.join();
    for (int fd = 0; fd < 3; ++fd) {
      if (::fcntl(fd, F_GETFD) < 0) problem("the host's /dev/null on fd " + std::to_string(fd) + " was closed");
    }
    return 0;
  }
  if (name == "stdio_closed_threads8") {
    // Stdio closed, 8 threads' first compiles at once: afterwards 0-2 free.
    ::close(0);
    ::close(1);
    ::close(2);
    std::vector<std::thread> ts;
    for (int t = 0; t < 8; ++t) {
      ts.emplace_back([t] { compile("t" + std::to_string(t), kernel("k" + std::to_string(t), t), "t.cu"); });
    }
    for (auto& th : ts) th.join();
    for (auto& [fd, what] : open_fds()) {
      if (fd <= 2) problem("fd " + std::to_string(fd) + " open after compiles: " + what);
    }
    return 0;
  }
  if (name == "relative_store_chdir") {
    // KCACHE_DIR relative with a trailing slash; the host changes its
    // working folder between compiles. Caching goes on (the test reads the
    // stats), nothing lands in the host's folders.
    const char* store = std::getenv("KCACHE_DIR");
    if (!store || ::chdir(work_dir.c_str()) != 0) { problem("setup"); return 0; }
    // work_dir is <tmp>/work_X, the store <tmp>/store.
    ::setenv("KCACHE_DIR", "../store/", 1);
    compile("a", kernel("ka", 1), "a.cu");
    ::mkdir((work_dir + "/sub").c_str(), 0755);
    if (::chdir((work_dir + "/sub").c_str()) != 0) problem("chdir");
    compile("a2", kernel("ka", 1), "a.cu");
    compile("b", kernel("kb", 2), "b.cu");
    ::chdir("/");
    compile("c", kernel("kc", 3), "c.cu");
    struct stat st;
    if (::stat((work_dir + "/store").c_str(), &st) == 0) problem("a store appeared in work/store");
    if (::stat("/store", &st) == 0) problem("a store appeared in /store");
    return 0;
  }
  if (name == "symlinked_store") {
    // KCACHE_DIR through a symlink (with a trailing slash): caching goes on.
    const char* store = std::getenv("KCACHE_DIR");
    ::mkdir(store, 0755);
    std::string link = work_dir + "/link";
    if (!store || ::symlink(store, link.c_str()) != 0) { problem("setup"); return 0; }
    ::setenv("KCACHE_DIR", (link + "/").c_str(), 1);
    two_compiles("");
    compile("c", kernel("kc", 3), "c.cu");
    return 0;
  }
  if (name == "big_host_threads") {
    // 1 GiB mapped and touched, 64 idle threads, then 8 first compiles at
    // once: each must take no longer than a compile does (printed).
    size_t size = size_t{1} << 30;
    char* m = static_cast<char*>(::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    for (size_t i = 0; i < size; i += 4096) m[i] = 1;
    std::atomic<bool> stop{false};
    std::vector<std::thread> idle;
    for (int i = 0; i < 64; ++i) idle.emplace_back([&] { while (!stop) ::usleep(20 * 1000); });
    auto t0 = std::chrono::steady_clock::now();
    std::vector<std::thread> ts;
    for (int t = 0; t < 8; ++t) {
      ts.emplace_back([t] { compile("t" + std::to_string(t), kernel("k" + std::to_string(t), t), "t.cu"); });
    }
    for (auto& th : ts) th.join();
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::fprintf(stderr, "big_host_threads: 8 compiles in %.3f s\n", s);
    if (s > 30) problem("8 compiles took " + std::to_string(s) + " s");
    stop = true;
    for (auto& th : idle) th.join();
    ::munmap(m, size);
    return 0;
  }
  if (name == "sigchld_blocked_no_pending") {
    // SIGCHLD blocked, no child of its own: nothing may be pending after.
    sigset_t chld;
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    ::pthread_sigmask(SIG_BLOCK, &chld, nullptr);
    two_compiles("");
    ::usleep(300 * 1000);
    sigset_t pending;
    ::sigpending(&pending);
    if (sigismember(&pending, SIGCHLD)) problem("SIGCHLD pending for a host with no children");
    return 0;
  }
  if (name == "kcache_exe_exits" || name == "kcache_exe_not_executable" ||
      name == "kcache_exe_sleeps") {
    // A KCACHE_EXE that cannot serve: the real NVRTC's answers, no hang.
    std::string exe = work_dir + "/fake_kcache";
    if (name == "kcache_exe_exits") {
      exe = "/bin/true";
    } else if (name == "kcache_exe_not_executable") {
      std::ofstream(exe) << "not a program\n";
      ::chmod(exe.c_str(), 0644);
    } else {
      // Starts and never answers (reads nothing), but ends in 15 s.
      std::ofstream(exe) << "#!/bin/sh\nexec sleep 15\n";
      ::chmod(exe.c_str(), 0755);
    }
    ::setenv("KCACHE_EXE", exe.c_str(), 1);
    std::atomic<bool> done{false};
    std::thread watchdog([&] {
      for (int i = 0; i < 400 && !done; ++i) ::usleep(50 * 1000);
      if (!done) {
        problem("compiles with a broken KCACHE_EXE hung for 20 s");
        std::ofstream(out_dir + "/state") << state_problems;
        ::_exit(3);
      }
    });
    two_compiles("");
    compile("c", kernel("kc", 3), "c.cu");
    done = true;
    watchdog.join();
    return 0;
  }
  if (name == "leak_300") {
    // 300 compiles (misses in the first drop-in run): descriptors and
    // threads after the first compile and at the end are the same.
    compile("first", kernel("first", 0), "first.cu");
    size_t fds = open_fds().size();
    int threads = thread_count();
    for (int i = 0; i < 300; ++i) {
      nvrtcProgram prog = nullptr;
      std::string src = kernel("k", 1000 + i);
      nvrtcCreateProgram(&prog, src.c_str(), "k.cu", 0, nullptr, nullptr);
      const char* opt = "-arch=compute_80";
      if (nvrtcCompileProgram(prog, 1, &opt) != NVRTC_SUCCESS) problem("compile " + std::to_string(i));
      nvrtcDestroyProgram(&prog);
    }
    compile("last", kernel("last", 0), "last.cu");
    if (open_fds().size() > fds) {
      std::string all;
      for (auto& [fd, what] : open_fds()) all += std::to_string(fd) + "=" + what + " ";
      problem("descriptors " + std::to_string(fds) + " -> " + std::to_string(open_fds().size()) + ": " + all);
    }
    if (thread_count() > threads) problem("threads " + std::to_string(threads) + " -> " + std::to_string(thread_count()));
    std::ifstream st("/proc/self/status");
    std::string line;
    while (std::getline(st, line)) if (line.rfind("VmRSS", 0) == 0) std::fprintf(stderr, "leak_300: %s\n", line.c_str());
    return 0;
  }
  if (int rc = thin_client_case(name); rc >= 0) return rc;
  std::fprintf(stderr, "host_attacker: unknown case %s\n", name.c_str());
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: host_attacker CASE OUT_DIR WORK_DIR\n");
    return 2;
  }
  out_dir = argv[2];
  work_dir = argv[3];
  int rc = run_case(argv[1]);
  std::ofstream(out_dir + "/state") << state_problems;
  return rc;
}
