// The seal's contract (compiler/seal/seal.h), checked with plain file calls in
// place of NVRTC: the boundary is the kernel's, so it holds for any code.
#include "compiler/seal/seal.h"

#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <functional>
#include <memory>
#include <chrono>
#include <cerrno>
#include <string>
#include <condition_variable>
#include <mutex>
#include <thread>

#include <gtest/gtest.h>

#include "tests/testing/temp_dir.h"

namespace kcache::compiler {
namespace {

using testing::TempDir;

bool contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

class SealTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (!seal_available(&why)) GTEST_SKIP() << "no seal on this kernel: " << why;
    ::mkdir((dir_ / "toolkit").c_str(), 0700);
    ::mkdir((dir_ / "user").c_str(), 0700);
    testing::write_file(dir_ / "toolkit/t.h", "toolkit");
    testing::write_file(dir_ / "user/u.h", "user");
  }
  TempDir dir_;
};

TEST_F(SealTest, AllowedFolderIsReadableAndEveryOtherFileIsRefused) {
  int toolkit_fd = -1, user_errno = 0, user_fd = -1;
  SealResult r = run_sealed({{dir_ / "toolkit"}, {}}, [&] {
    toolkit_fd = ::open((dir_ / "toolkit/t.h").c_str(), O_RDONLY | O_CLOEXEC);
    user_fd = ::open((dir_ / "user/u.h").c_str(), O_RDONLY | O_CLOEXEC);
    user_errno = errno;
  });
  ASSERT_TRUE(r.sealed) << r.why;
  EXPECT_GE(toolkit_fd, 0);
  EXPECT_LT(user_fd, 0);
  EXPECT_EQ(user_errno, EACCES);
  if (toolkit_fd >= 0) ::close(toolkit_fd);
  if (user_fd >= 0) ::close(user_fd);
  EXPECT_TRUE(contains(r.probes, dir_ / "toolkit/t.h"));
  EXPECT_TRUE(contains(r.probes, dir_ / "user/u.h"));
}

TEST_F(SealTest, ASymbolicLinkOrDotDotDoesNotLeadOut) {
  ASSERT_EQ(::symlink((dir_ / "user/u.h").c_str(), (dir_ / "toolkit/link.h").c_str()), 0);
  int via_link = -1, via_dots = -1;
  SealResult r = run_sealed({{dir_ / "toolkit"}, {}}, [&] {
    via_link = ::open((dir_ / "toolkit/link.h").c_str(), O_RDONLY | O_CLOEXEC);
    via_dots = ::open((dir_ / "toolkit/../user/u.h").c_str(), O_RDONLY | O_CLOEXEC);
  });
  ASSERT_TRUE(r.sealed) << r.why;
  EXPECT_LT(via_link, 0);
  EXPECT_LT(via_dots, 0);
}

TEST_F(SealTest, RelativeNamesResolveInsideADeletedFolder) {
  // Deeper than the chain: the name climbs out and is recorded where it lands.
  std::string dots;
  for (int i = 0; i < kSealDepth + 8; ++i) dots += "../";
  int near = -2, far = -2;
  SealResult r = run_sealed({{dir_ / "toolkit"}, {}}, [&] {
    near = ::open("u.h", O_RDONLY | O_CLOEXEC);
    far = ::open((dots + "etc/passwd").c_str(), O_RDONLY | O_CLOEXEC);
  });
  ASSERT_TRUE(r.sealed) << r.why;
  EXPECT_LT(near, 0);
  EXPECT_LT(far, 0);
  EXPECT_FALSE(contains(r.probes, "u.h"));  // inside the chain: nothing can be there
  EXPECT_TRUE(contains(r.probes, "/etc/passwd"));
}

TEST_F(SealTest, WritableFolderTakesNewFiles) {
  ::mkdir((dir_ / "scratch").c_str(), 0700);
  int fd = -1;
  SealResult r = run_sealed({{}, {dir_ / "scratch"}}, [&] {
    fd = ::open((dir_ / "scratch/pch").c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0600);
  });
  ASSERT_TRUE(r.sealed) << r.why;
  EXPECT_GE(fd, 0);
  if (fd >= 0) ::close(fd);
}

// Serving (issue 27): the real file system, every file read from a snapshot.
SealPolicy serving(const std::string& working_dir, std::vector<std::string> readable = {}) {
  SealPolicy p(std::move(readable), {});
  p.serve = true;
  p.working_dir = working_dir;
  return p;
}

std::string read_all(int fd) {
  std::string out;
  char buf[256];
  for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;) out.append(buf, static_cast<size_t>(n));
  return out;
}

TEST_F(SealTest, ServingReadsEveryFileFromASnapshotAndHashesIt) {
  std::string got, relative, after_edit;
  int write_errno = 0;
  SealResult r = run_sealed(serving(dir_ / "user", {dir_ / "toolkit"}), [&] {
    int fd = ::open((dir_ / "user/u.h").c_str(), O_RDONLY | O_CLOEXEC);
    got = fd >= 0 ? read_all(fd) : "open failed";
    if (fd >= 0) ::close(fd);
    fd = ::open("u.h", O_RDONLY);  // from the working folder asked for
    relative = fd >= 0 ? read_all(fd) : "open failed";
    if (fd >= 0) ::close(fd);
    int toolkit = ::open((dir_ / "toolkit/t.h").c_str(), O_RDONLY | O_CLOEXEC);  // its own
    if (toolkit >= 0) ::close(toolkit);
    int w = ::open((dir_ / "user/u.h").c_str(), O_WRONLY | O_CLOEXEC);
    write_errno = w < 0 ? errno : 0;
    if (w >= 0) ::close(w);
  });
  ASSERT_TRUE(r.sealed) << r.why;
  EXPECT_EQ(got, "user");
  EXPECT_EQ(relative, "user");
  EXPECT_EQ(write_errno, EACCES);  // nothing is written outside the writable folders
  ASSERT_EQ(r.served.size(), 2u);
  for (const ServedFile& f : r.served) {
    EXPECT_EQ(f.path, dir_ / "user/u.h");
    EXPECT_EQ(f.content, xxh3_128("user"));
    EXPECT_EQ(f.size, 4u);
  }
  EXPECT_TRUE(r.refused.empty()) << r.refused;
  EXPECT_TRUE(contains(r.probes, dir_ / "toolkit/t.h"));  // read by itself, a probe
}

// An edit made by a thread that is not sealed, as an editor saving over the
// file would, after the sealed code opened it and before it reads on: the
// sealed code calls opened() and waits there for the edit.
class EditAfterOpen {
 public:
  explicit EditAfterOpen(std::function<void()> edit)
      : editor_([this, edit] {
          std::unique_lock<std::mutex> lock(m_);
          cv_.wait(lock, [&] { return opened_; });
          edit();
          edited_ = true;
          cv_.notify_all();
        }) {}
  ~EditAfterOpen() { editor_.join(); }
  void opened() {
    std::unique_lock<std::mutex> lock(m_);
    opened_ = true;
    cv_.notify_all();
    cv_.wait(lock, [&] { return edited_; });
  }

 private:
  std::mutex m_;
  std::condition_variable cv_;
  bool opened_ = false, edited_ = false;
  std::thread editor_;  // last: it starts once the members it uses are made
};

TEST_F(SealTest, ServedBytesAreASnapshotAnEditCannotReach) {
  std::string first, second;
  EditAfterOpen edit([&] {
    int w = ::open((dir_ / "user/u.h").c_str(), O_WRONLY | O_CLOEXEC);
    if (w >= 0) {
      EXPECT_EQ(::pwrite(w, "EDIT", 4, 0), 4);
      ::close(w);
    }
  });
  SealResult r = run_sealed(serving(dir_.path()), [&] {
    int fd = ::open((dir_ / "user/u.h").c_str(), O_RDONLY | O_CLOEXEC);
    char one = 0;
    if (fd >= 0 && ::read(fd, &one, 1) == 1) first = std::string(1, one);
    edit.opened();
    if (fd >= 0) {
      second = read_all(fd);
      ::close(fd);
    }
  });
  ASSERT_TRUE(r.sealed) << r.why;
  EXPECT_EQ(testing::read_file_or_die(dir_ / "user/u.h"), "EDIT");  // the disk changed
  EXPECT_EQ(first + second, "user");                          // the read did not
  ASSERT_EQ(r.served.size(), 1u);
  EXPECT_EQ(r.served[0].content, xxh3_128("user"));
}

TEST_F(SealTest, ServingRefusesAFifoAndADeviceWithoutBlocking) {
  ASSERT_EQ(::mkfifo((dir_ / "user/pipe").c_str(), 0600), 0);
  int fifo_errno = 0, zero_errno = 0;
  SealResult r = run_sealed(serving(dir_.path()), [&] {
    int fd = ::open((dir_ / "user/pipe").c_str(), O_RDONLY | O_CLOEXEC);  // would block
    fifo_errno = fd < 0 ? errno : 0;
    if (fd >= 0) ::close(fd);
    fd = ::open("/dev/zero", O_RDONLY | O_CLOEXEC);  // would never end
    zero_errno = fd < 0 ? errno : 0;
    if (fd >= 0) ::close(fd);
  });
  ASSERT_TRUE(r.sealed) << r.why;
  EXPECT_EQ(fifo_errno, EACCES);
  EXPECT_EQ(zero_errno, EACCES);
  EXPECT_EQ(r.refused, dir_ / "user/pipe" + " is a FIFO");
  EXPECT_TRUE(r.served.empty());
}

TEST_F(SealTest, ServingAnswersAnAbsentNameAsTheDiskDoes) {
  int err = 0;
  SealResult r = run_sealed(serving(dir_.path()), [&] {
    int fd = ::open("user/none.h", O_RDONLY | O_CLOEXEC);
    err = fd < 0 ? errno : 0;
    if (fd >= 0) ::close(fd);
  });
  ASSERT_TRUE(r.sealed) << r.why;
  EXPECT_EQ(err, ENOENT);
  EXPECT_TRUE(contains(r.probes, dir_ / "user/none.h"));
  EXPECT_TRUE(r.served.empty());
}

// Serving a file this process has copied before (SnapshotCache in seal.cc).
class KnownFilesTest : public SealTest {
 protected:
  void SetUp() override {
    SealTest::SetUp();
    set_snapshot_settle_margin_for_testing(0);
  }
  void TearDown() override { set_snapshot_settle_margin_for_testing(int64_t{2} * 1000000000); }

  // One sealed read of user/u.h: what it read, and how it was served.
  std::pair<std::string, SealResult> read_once(const std::function<void()>& after_open = {}) {
    std::string got;
    SealResult r = run_sealed(serving(dir_.path()), [&] {
      int fd = ::open((dir_ / "user/u.h").c_str(), O_RDONLY | O_CLOEXEC);
      if (after_open) after_open();
      got = fd >= 0 ? read_all(fd) : "open failed";
      if (fd >= 0) ::close(fd);
    });
    return {got, r};
  }
  // Past the file system's timestamp granularity: an edit now gets a new stamp.
  static void tick() { std::this_thread::sleep_for(std::chrono::milliseconds(50)); }
};

TEST_F(KnownFilesTest, AFileCopiedBeforeIsServedFromItselfWithTheSameKey) {
  tick();
  auto [first, a] = read_once();
  auto [second, b] = read_once();
  ASSERT_TRUE(a.sealed) << a.why;
  ASSERT_TRUE(b.sealed) << b.why;
  EXPECT_EQ(first, "user");
  EXPECT_EQ(second, "user");
  ASSERT_EQ(a.served.size(), 1u);
  ASSERT_EQ(b.served.size(), 1u);
  EXPECT_FALSE(a.served[0].known);
  EXPECT_TRUE(b.served[0].known);
  EXPECT_EQ(b.served[0].content, xxh3_128("user"));
  EXPECT_EQ(b.served[0].ino, a.served[0].ino);
}

TEST_F(KnownFilesTest, AnEditedOrReplacedFileIsCopiedAgain) {
  tick();
  read_once();
  // In place, same size; then replaced by another file with the same bytes.
  const std::vector<std::function<void()>> edits = {
      [&] { testing::write_file(dir_ / "user/u.h", "USER"); },
      [&] {
        testing::write_file(dir_ / "user/other.h", "USER");
        ASSERT_EQ(::rename((dir_ / "user/other.h").c_str(), (dir_ / "user/u.h").c_str()), 0);
      }};
  for (const auto& edit : edits) {
    tick();
    edit();
    tick();
    auto [got, r] = read_once();
    ASSERT_TRUE(r.sealed) << r.why;
    EXPECT_EQ(got, "USER");
    ASSERT_EQ(r.served.size(), 1u);
    EXPECT_FALSE(r.served[0].known);
    EXPECT_EQ(r.served[0].content, xxh3_128("USER"));
  }
}

TEST_F(KnownFilesTest, AKnownFileWrittenWhileReadIsGivenAsChanged) {
  tick();
  read_once();
  tick();
  EditAfterOpen edit([&] { testing::write_file(dir_ / "user/u.h", "EDIT"); });
  auto [got, r] = read_once([&] { edit.opened(); });
  EXPECT_EQ(got, "EDIT");  // the file itself was served
  ASSERT_TRUE(r.sealed) << r.why;
  ASSERT_EQ(r.served.size(), 1u);
  EXPECT_TRUE(r.served[0].known);
  EXPECT_EQ(r.served[0].ctime_ns, UINT64_MAX);  // changed: probes.h never keys it
}

TEST_F(KnownFilesTest, AWriteThroughASharedMappingIsSeenThoughNoStampChanges) {
  // The first write through the mapping changes the stamps; later ones to
  // the dirty page do not (tmpfs, and ext4 until writeback).
  int fd = ::open((dir_ / "user/u.h").c_str(), O_RDWR | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  void* map = ::mmap(nullptr, 4, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  ASSERT_NE(map, MAP_FAILED);
  char* bytes = static_cast<char*>(map);
  bytes[0] = 'U';
  tick();
  read_once();
  struct stat before;
  ASSERT_EQ(::stat((dir_ / "user/u.h").c_str(), &before), 0);
  bytes[1] = 'S';  // "USer"
  struct stat after;
  ASSERT_EQ(::stat((dir_ / "user/u.h").c_str(), &after), 0);
  auto [got, r] = read_once();
  ::munmap(map, 4);
  ASSERT_TRUE(r.sealed) << r.why;
  ASSERT_EQ(r.served.size(), 1u);
  EXPECT_EQ(got, "USer");
  // The contract: bytes given as read are the bytes read.
  if (r.served[0].ctime_ns != UINT64_MAX) {
    EXPECT_EQ(r.served[0].content, xxh3_128(got));
  }
  if (before.st_ctim.tv_nsec == after.st_ctim.tv_nsec && before.st_ctim.tv_sec == after.st_ctim.tv_sec) {
    // Served from the file by its unchanged stamp: seen by its bytes.
    EXPECT_TRUE(r.served[0].known);
    EXPECT_EQ(r.served[0].ctime_ns, UINT64_MAX);
  }
}

TEST_F(SealTest, AFileJustWrittenIsNeverServedFromItself) {
  // The default margin: written less than two seconds ago, copied each time.
  for (int i = 0; i < 2; ++i) {
    SealResult r = run_sealed(serving(dir_.path()), [&] {
      int fd = ::open((dir_ / "user/u.h").c_str(), O_RDONLY | O_CLOEXEC);
      if (fd >= 0) ::close(fd);
    });
    ASSERT_TRUE(r.sealed) << r.why;
    ASSERT_EQ(r.served.size(), 1u);
    EXPECT_FALSE(r.served[0].known);
  }
}

TEST_F(SealTest, ExceptionsReachTheCaller) {
  EXPECT_THROW(run_sealed({}, [] { throw std::runtime_error("x"); }), std::runtime_error);
}

// Without SealPolicy::one_cpu the sealed thread is not pinned
// (seal_cpu_test has one_cpu).
TEST_F(SealTest, TheSealedThreadMayRunOnEveryCpuItsCallerMay) {
  cpu_set_t caller, sealed;
  ASSERT_EQ(::sched_getaffinity(0, sizeof caller, &caller), 0);
  CPU_ZERO(&sealed);
  SealResult r = run_sealed({}, [&] { ::sched_getaffinity(0, sizeof sealed, &sealed); });
  ASSERT_TRUE(r.sealed) << r.why;
  EXPECT_TRUE(CPU_EQUAL(&caller, &sealed)) << CPU_COUNT(&sealed) << " of " << CPU_COUNT(&caller);
}

// A thread the sealed code starts inherits the seal, and may still name
// files after the code returned (as glibc's thread exit may, trimming a
// heap): it is answered and recorded, and run_sealed returns once it ended.
TEST_F(SealTest, AThreadThatOutlivesTheSealedCodeIsAnsweredUntilItEnds) {
  std::atomic<int> opened{-2};
  SealResult r = run_sealed({{dir_ / "toolkit"}, {}}, [&] {
    std::thread([&, path = dir_ / "toolkit/t.h"] {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
      if (fd >= 0) ::close(fd);
      opened = fd >= 0 ? 1 : -errno;
    }).detach();
  });
  ASSERT_TRUE(r.sealed) << r.why;
  EXPECT_EQ(opened.load(), 1);
  EXPECT_TRUE(contains(r.probes, dir_ / "toolkit/t.h"));
}

// One that lives on is given up on after a second: run_sealed returns, and
// says the record may miss what it names later.
TEST_F(SealTest, AThreadThatLivesOnIsGivenUpOnAndTheResultIsNotSealed) {
  auto stay = std::make_shared<std::atomic<bool>>(true);
  const auto start = std::chrono::steady_clock::now();
  SealResult r = run_sealed({{dir_ / "toolkit"}, {}}, [stay] {
    std::thread([stay] {
      while (*stay) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }).detach();
  });
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  *stay = false;
  EXPECT_FALSE(r.sealed);
  EXPECT_NE(r.why.find("outlived"), std::string::npos) << r.why;
  EXPECT_LT(seconds, 10.0);
}

// The program's signals go to its other threads: a path call stopped at
// the supervisor is interruptible where the call itself is not, and a
// handler without SA_RESTART would hand NVRTC an EINTR it never meets.
TEST_F(SealTest, TheSealedThreadBlocksTheProgramsSignals) {
  sigset_t blocked;
  sigemptyset(&blocked);
  SealResult r = run_sealed({}, [&] { pthread_sigmask(SIG_BLOCK, nullptr, &blocked); });
  ASSERT_TRUE(r.sealed) << r.why;
  for (int signal : {SIGINT, SIGTERM, SIGALRM, SIGCHLD, SIGUSR1, SIGPROF}) {
    EXPECT_TRUE(sigismember(&blocked, signal)) << signal;
  }
}

// What a container runtime's seccomp policy does to a syscall it does not
// know: in a child process, Landlock's first call fails with ENOSYS.
void deny_landlock_in_this_process() {
  sock_filter f[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 444 /* landlock_create_ruleset */, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  sock_fprog prog{sizeof f / sizeof *f, f};
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
      ::syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) != 0) {
    ::_exit(90);
  }
}

TEST(SealRefusedTest, WithoutLandlockTheCodeStillRunsAndSaysItIsNotSealed) {
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    deny_landlock_in_this_process();
    bool ran = false;
    SealResult r = run_sealed({{"/usr"}, {}}, [&] { ran = true; });
    std::string why;
    bool available = seal_available(&why);
    // 0: as the contract says; else which part failed.
    ::_exit(!ran ? 91 : r.sealed ? 92 : available ? 93 : why.find("Landlock") == std::string::npos ? 94 : 0);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "91: fn did not run, 92: claims sealed, 93: claims available, "
                                       "94: the reason does not name Landlock, 90: no seccomp";
}

TEST(SealPathTest, LexicalResolutionFoldsDotsAndDotDots) {
  EXPECT_EQ(resolve_lexically("/a/b", "c/./d"), "/a/b/c/d");
  EXPECT_EQ(resolve_lexically("/a/b", "../../../x"), "/x");
  EXPECT_EQ(resolve_lexically("/a/b", "/abs//y"), "/abs/y");
}

}  // namespace
}  // namespace kcache::compiler
