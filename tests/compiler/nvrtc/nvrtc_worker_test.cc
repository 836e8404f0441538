// Compiling in a worker process (the kcache binary's hidden __nvrtc-worker
// verb): the same result as in-process, errors carried across, and a worker
// that dies or answers nonsense is an error that says so.
#include "compiler/nvrtc/nvrtc_worker.h"

#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include "common/error.h"
#include "compiler/compiler.h"
#include "compiler/toolkit.h"

namespace kcache::compiler {
namespace {

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

std::vector<std::string> kcache_worker() {
  std::string root = std::string(std::getenv("TEST_SRCDIR")) + "/" + std::getenv("TEST_WORKSPACE");
  return {root + "/cli/kcache", "__nvrtc-worker"};
}

NvrtcInput saxpy_input(const Toolkit& t) {
  NvrtcInput in;
  in.source_name = "k.cu";
  in.source =
      "#include \"scale.h\"\ntemplate <typename T> __global__ void k(T* p) { *p = SCALE; }\n";
  in.headers = {{"scale.h", "#define SCALE 3\n"}};
  in.options = {"-arch=sm_80", "-I" + t.include_dirs[0]};
  in.name_expressions = {"k<float>"};
  return in;
}

TEST(NvrtcWorkerTest, RequestRoundTrips) {
  NvrtcInput in = saxpy_input(find_toolkit(""));
  in.want_cubin = false;
  std::string path;
  NvrtcInput out;
  decode_worker_request(encode_worker_request("/x/libnvrtc.so.13", in), path, out);
  EXPECT_EQ(path, "/x/libnvrtc.so.13");
  EXPECT_EQ(out.source, in.source);
  ASSERT_EQ(out.headers.size(), 1u);
  EXPECT_EQ(out.headers[0].content, "#define SCALE 3\n");
  EXPECT_EQ(out.options, in.options);
  EXPECT_EQ(out.name_expressions, in.name_expressions);
  EXPECT_FALSE(out.want_cubin);
  EXPECT_THROW(decode_worker_request("garbage", path, out), CorruptError);
}

TEST(NvrtcWorkerTest, WorkerCompilesWhatThisProcessCompiles) {
  Toolkit t = find_toolkit("");
  NvrtcInput in = saxpy_input(t);
  NvrtcOutput here = Nvrtc::open(t.nvrtc.path).compile(in);
  NvrtcOutput there = compile_in_worker(kcache_worker(), t.nvrtc.path, in);
  EXPECT_EQ(there.image, here.image);
  ASSERT_EQ(there.lowered_names.size(), 1u);
  EXPECT_EQ(there.lowered_names[0].lowered_name, here.lowered_names[0].lowered_name);
  EXPECT_GT(there.ms, 0);
}

TEST(NvrtcWorkerTest, CompileErrorComesBackWithTheLog) {
  Toolkit t = find_toolkit("");
  NvrtcInput in = saxpy_input(t);
  in.source = "__global__ void k() { nope; }\n";
  try {
    compile_in_worker(kcache_worker(), t.nvrtc.path, in);
    FAIL() << "expected CompileError";
  } catch (const CompileError& e) {
    EXPECT_TRUE(contains(e.log(), "k.cu(1): error: identifier \"nope\" is undefined")) << e.log();
    EXPECT_EQ(e.options(), in.options);
  }
}

// An answer of kMemfdFrameBytes or more travels in a sealed memfd over the
// socket, with a note on the pipe; the reader gets the same bytes.
TEST(NvrtcWorkerTest, ALargeFrameTravelsInASealedMemfd) {
  int sock[2], pipe_fds[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sock), 0);
  ASSERT_EQ(::pipe2(pipe_fds, O_CLOEXEC), 0);
  std::string big(315 << 10, 'x');
  for (size_t i = 0; i < big.size(); i += 7) big[i] = static_cast<char>(i);
  ASSERT_TRUE(write_large_frame(sock[0], pipe_fds[1], big));
  std::string frame;
  ASSERT_EQ(read_frame(pipe_fds[0], frame), Frame::ok);
  EXPECT_LT(frame.size(), 64u) << "the bytes went through the pipe";
  ASSERT_TRUE(is_memfd_note(frame));
  ASSERT_TRUE(receive_memfd_frame(sock[1], frame));
  EXPECT_TRUE(frame == big);
  // A small one goes through the pipe as it is.
  ASSERT_TRUE(write_large_frame(sock[0], pipe_fds[1], "small"));
  ASSERT_EQ(read_frame(pipe_fds[0], frame), Frame::ok);
  EXPECT_EQ(frame, "small");
  for (int fd : {sock[0], sock[1], pipe_fds[0], pipe_fds[1]}) ::close(fd);
}

// A descriptor that is not a sealed memfd of the noted size is refused:
// its bytes could change while (or after) they are read.
TEST(NvrtcWorkerTest, AnUnsealedMemfdIsRefused) {
  int sock[2], pipe_fds[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sock), 0);
  ASSERT_EQ(::pipe2(pipe_fds, O_CLOEXEC), 0);
  // A real note (from a real large frame), whose descriptor is then taken
  // out and replaced by an unsealed memfd of the same size.
  const std::string big(100 << 10, 'y');
  ASSERT_TRUE(write_large_frame(sock[0], pipe_fds[1], big));
  std::string note;
  ASSERT_EQ(read_frame(pipe_fds[0], note), Frame::ok);
  std::string taken = note;
  ASSERT_TRUE(receive_memfd_frame(sock[1], taken));
  int unsealed = ::memfd_create("unsealed", MFD_CLOEXEC);
  ASSERT_GE(unsealed, 0);
  ASSERT_EQ(::write(unsealed, big.data(), big.size()), static_cast<ssize_t>(big.size()));
  char byte = 'm';
  iovec iov{&byte, 1};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  cmsghdr* cm = CMSG_FIRSTHDR(&msg);
  cm->cmsg_level = SOL_SOCKET;
  cm->cmsg_type = SCM_RIGHTS;
  cm->cmsg_len = CMSG_LEN(sizeof(int));
  std::memcpy(CMSG_DATA(cm), &unsealed, sizeof unsealed);
  ASSERT_EQ(::sendmsg(sock[0], &msg, 0), 1);
  EXPECT_FALSE(receive_memfd_frame(sock[1], note));
  // No descriptor waiting at all: refused, without waiting.
  EXPECT_FALSE(receive_memfd_frame(sock[1], taken = note));
  for (int fd : {unsealed, sock[0], sock[1], pipe_fds[0], pipe_fds[1]}) ::close(fd);
}

TEST(NvrtcWorkerTest, OtherErrorsKeepTheirKind) {
  Toolkit t = find_toolkit("");
  try {
    compile_in_worker(kcache_worker(), "/nowhere/libnvrtc.so", saxpy_input(t));
    FAIL() << "expected NotFound";
  } catch (const NotFound& e) {
    EXPECT_TRUE(contains(e.what(), "cannot load NVRTC from /nowhere/libnvrtc.so")) << e.what();
  }
}

TEST(NvrtcWorkerTest, DeadOrSilentWorkerIsAnErrorSayingSo) {
  Toolkit t = find_toolkit("");
  try {
    compile_in_worker({"/bin/sh", "-c", "kill -9 $$"}, t.nvrtc.path, saxpy_input(t));
    FAIL();
  } catch (const Error& e) {
    EXPECT_TRUE(contains(e.what(), "died of signal 9")) << e.what();
  }
  try {
    compile_in_worker({"/bin/false"}, t.nvrtc.path, saxpy_input(t));
    FAIL();
  } catch (const Error& e) {
    EXPECT_TRUE(contains(e.what(), "gave no answer (exit status 1)")) << e.what();
  }
  EXPECT_THROW(compile_in_worker({"/nowhere/kcache"}, t.nvrtc.path, saxpy_input(t)), Error);
}

// Whichever targets ran in a worker, the bundle is the same.
TEST(NvrtcWorkerTest, CompilerWithWorkersMakesTheSameBundle) {
  CompileOptions o;
  o.source_path = "tests/compiler/kernels/scale_template.cu";
  o.archs = {"sm_80", "sm_86", "sm_90"};
  o.ptx_arch = "compute_90";
  o.name_expressions = {"scale<float>"};
  Compiler in_process(find_toolkit(""), nullptr, 4);
  Compiler with_workers(find_toolkit(""), nullptr, 4, kcache_worker());
  EXPECT_EQ(with_workers.compile(o).bundle, in_process.compile(o).bundle);
}

}  // namespace
}  // namespace kcache::compiler
