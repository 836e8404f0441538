#include "compiler/nvrtc/nvrtc_worker.h"

#include <stdlib.h>

#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>

#include "cache/format/entry.h"
#include "common/bytes.h"
#include "common/error.h"
#include "common/file_system.h"
#include "compiler/nvrtc/pch.h"

extern char** environ;

namespace kcache::compiler {
namespace {

// Version 2: program compiles (NvrtcInput::program) and their answers;
// version 3: the names NVRTC gave relative to its working folder and
// absolutely (NvrtcOutput::relative_names, absolute_names); version 4: the
// names NVRTC was answered "no such file" as the driver's cache (hidden).
constexpr std::string_view kRequestMagic{"KCNVRQ4\0", 8};
constexpr std::string_view kResponseMagic{"KCNVRS4\0", 8};

enum Status : uint8_t { kOk = 0, kCompileError = 1, kOtherError = 2 };

std::string read_all(int fd) {
  std::string out;
  char buf[1 << 16];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

// `socket`: send() with MSG_NOSIGNAL, so a child that died early makes the
// write fail with EPIPE instead of raising SIGPIPE in the whole process.
bool write_all(int fd, std::string_view data, bool socket = false) {
  while (!data.empty()) {
    ssize_t n = socket ? ::send(fd, data.data(), data.size(), MSG_NOSIGNAL)
                       : ::write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() { reset(); }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  void reset() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  int* out() { return &fd_; }

 private:
  int fd_ = -1;
};

}  // namespace

std::string encode_worker_request(const std::string& nvrtc_path, const NvrtcInput& input) {
  ByteWriter w;
  w.bytes(kRequestMagic);
  w.str(nvrtc_path);
  w.str(input.source_name);
  w.str(input.source);
  w.u32(static_cast<uint32_t>(input.headers.size()));
  for (const NvrtcHeader& h : input.headers) {
    w.str(h.name);
    w.str(h.content);
  }
  w.strs(input.options);
  w.strs(input.name_expressions);
  w.u8(input.want_cubin ? 1 : 0);
  w.u8(input.want_ptx ? 1 : 0);
  w.strs(input.writable_dirs);
  w.u8(input.program ? 1 : 0);
  w.u8(input.serve_disk ? 1 : 0);
  w.str(input.working_dir);
  w.str(input.pwd);
  return w.take();
}

void decode_worker_request(std::string_view bytes, std::string& nvrtc_path, NvrtcInput& input) {
  ByteReader r(bytes, "NVRTC worker request");
  if (r.bytes(kRequestMagic.size(), "magic") != kRequestMagic) r.fail("bad magic");
  nvrtc_path = std::string(r.str("NVRTC path"));
  input.source_name = std::string(r.str("source name"));
  input.source = std::string(r.str("source"));
  uint32_t headers = r.u32("header count");
  if (headers > r.remaining() / 8) r.fail("header count past the end");
  for (uint32_t i = 0; i < headers; ++i) {
    NvrtcHeader h;
    h.name = std::string(r.str("header name"));
    h.content = std::string(r.str("header content"));
    input.headers.push_back(std::move(h));
  }
  input.options = r.strs("options");
  input.name_expressions = r.strs("name expressions");
  input.want_cubin = r.u8("want cubin") != 0;
  input.want_ptx = r.u8("want PTX") != 0;
  input.writable_dirs = r.strs("writable folders");
  input.program = r.u8("program") != 0;
  input.serve_disk = r.u8("serve disk") != 0;
  input.working_dir = std::string(r.str("working folder"));
  input.pwd = std::string(r.str("$PWD"));
  r.expect_end();
}

namespace {

// Sets $PWD for the compile of `input`: NVRTC writes $PWD's spelling of its
// working folder into -lineinfo / -G outputs (where $PWD names that folder),
// and this process serves requests from many folders. A served compile gets
// its requester's spelling; any other, this process's own folder (its
// sealed thread works elsewhere, so NVRTC falls back to getcwd).
void set_pwd_for(const NvrtcInput& input) {
  std::string pwd = input.pwd;
  if (!input.serve_disk || pwd.empty()) {
    char cwd[PATH_MAX];
    pwd = ::getcwd(cwd, sizeof cwd) ? cwd : "/";
  }
  ::setenv("PWD", pwd.c_str(), 1);
}

}  // namespace

// Compiles one encoded request; returns the encoded response.
std::string answer(std::string_view request, const std::string& pch_dir) {
  ByteWriter w;
  w.bytes(kResponseMagic);
  try {
    std::string nvrtc_path;
    NvrtcInput input;
    decode_worker_request(request, nvrtc_path, input);
    set_pwd_for(input);
    const Nvrtc& nvrtc = Nvrtc::open(nvrtc_path);
    // Served, a PCH's headers are keyed from its maker's reads (pch.h).
    NvrtcOutput out =
        pch_dir.empty() ? nvrtc.compile(input) : compile_with_pch(nvrtc, input, pch_dir);
    w.u8(kOk);
    w.str(out.image);
    w.str(out.log);
    w.u64(static_cast<uint64_t>(out.ms * 1000));
    cache::write_lowered_names(w, out.lowered_names);
    w.str(out.ptx);
    w.u8(out.sealed ? 1 : 0);
    w.str(out.unsealed_why);
    w.strs(out.probes);
    w.u64(static_cast<uint64_t>(out.started_ns));
    w.u8(out.program ? 1 : 0);
    if (out.program) w.str(out.program->encode());
    w.u32(static_cast<uint32_t>(out.served.size()));
    for (const ServedFile& f : out.served) {
      w.str(f.path);
      for (uint64_t v : {f.content.high, f.content.low, f.dev, f.ino, f.size, f.mtime_ns,
                         f.ctime_ns}) {
        w.u64(v);
      }
    }
    w.strs(out.relative_names);
    w.strs(out.absolute_names);
    w.strs(out.hidden);
  } catch (const CompileError& e) {
    w.u8(kCompileError);
    w.str(e.what());
    w.str(e.log());
    w.strs(e.probes());
    w.u64(static_cast<uint64_t>(e.started_ns()));
  } catch (const Error& e) {
    w.u8(kOtherError);
    w.u8(static_cast<uint8_t>(e.kind()));
    w.str(e.what());
  } catch (const std::exception& e) {
    w.u8(kOtherError);
    w.u8(static_cast<uint8_t>(ErrorKind::io));
    w.str(std::string("NVRTC worker: ") + e.what());
  }
  return w.take();
}

int run_nvrtc_worker(int in_fd, int out_fd) {
  return write_all(out_fd, answer(read_all(in_fd), "")) ? 0 : 1;
}

int run_nvrtc_worker_loop(int in_fd, int out_fd, const std::string& pch_dir, int idle_exit_ms,
                          const OtherRequests& other,
                          const std::function<void()>& after_answer) {
  // NVRTC writes its PCH work files to $TMPDIR, and the seal lets it write
  // only beneath the PCH folder (pch.h). This process exists for compiles.
  if (!pch_dir.empty()) ::setenv("TMPDIR", pch_dir.c_str(), 1);
  if (!write_frame(out_fd, kWorkerHello)) return 1;
  for (;;) {
    if (idle_exit_ms > 0) {
      pollfd in{in_fd, POLLIN, 0};
      int polled;
      while ((polled = ::poll(&in, 1, idle_exit_ms)) < 0 && errno == EINTR) {
      }
      if (polled == 0) return 0;  // idle: the pool starts another when needed
    }
    std::string request;
    switch (read_frame(in_fd, request)) {
      case Frame::eof:
        return 0;
      case Frame::bad:
        return 1;
      case Frame::ok:
        break;
    }
    std::optional<std::string> answered;
    if (other) answered = other(request);
    // The pool's mark: compile without PCH (kNoPchMark).
    std::string_view plain = request;
    const bool marked = !answered && plain.substr(0, kNoPchMark.size()) == kNoPchMark;
    plain.remove_prefix(marked ? kNoPchMark.size() : 0);
    const bool written = answered ? write_large_frame(in_fd, out_fd, *answered)
                                  : write_frame(out_fd, answer(plain, marked ? "" : pch_dir));
    if (!written) return 1;
    if (after_answer) after_answer();
  }
}

bool write_frame(int fd, std::string_view message, bool socket) {
  char size[4];
  for (int i = 0; i < 4; ++i) size[i] = static_cast<char>(message.size() >> (8 * i));
  return write_all(fd, std::string_view(size, 4), socket) && write_all(fd, message, socket);
}

namespace {

constexpr std::string_view kMemfdNoteMagic = "KCMEMFD1";
// F_SEAL_FUTURE_WRITE, not F_SEAL_WRITE: the sender never maps it, so no
// write can reach it either way, and F_SEAL_WRITE waits for pages still
// referenced by another CPU's LRU batch (the ones just written: milliseconds
// on a busy machine). The reader copies the bytes before it reads them.
constexpr int kMemfdSeals = F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_FUTURE_WRITE | F_SEAL_SEAL;

// `message` in a new sealed memfd, or -1.
int sealed_memfd(std::string_view message) {
  int fd = ::memfd_create("kcache-answer", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) return -1;
  if (!write_all(fd, message) || ::fcntl(fd, F_ADD_SEALS, kMemfdSeals) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

bool send_descriptor(int socket_fd, int fd) {
  char byte = 'm';
  iovec iov{&byte, 1};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  cmsghdr* c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int));
  std::memcpy(CMSG_DATA(c), &fd, sizeof fd);
  ssize_t n;
  while ((n = ::sendmsg(socket_fd, &msg, MSG_NOSIGNAL)) < 0 && errno == EINTR) {
  }
  return n == 1;
}

// The descriptor waiting on `socket_fd` (sent before the note that says
// so: never waits), close-on-exec and above 2 (a host that closed its
// stdio must find 0-2 free), or -1.
int receive_descriptor(int socket_fd) {
  char byte;
  iovec iov{&byte, 1};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  ssize_t n;
  while ((n = ::recvmsg(socket_fd, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC)) < 0 && errno == EINTR) {
  }
  cmsghdr* c = n == 1 ? CMSG_FIRSTHDR(&msg) : nullptr;
  if (!c || c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS ||
      c->cmsg_len != CMSG_LEN(sizeof(int))) {
    return -1;
  }
  int fd;
  std::memcpy(&fd, CMSG_DATA(c), sizeof fd);
  if (fd > 2) return fd;
  int moved = ::fcntl(fd, F_DUPFD_CLOEXEC, 3);
  ::close(fd);
  return moved;
}

}  // namespace

bool write_large_frame(int socket_fd, int out_fd, std::string_view message) {
  if (message.size() < kMemfdFrameBytes) return write_frame(out_fd, message);
  int fd = sealed_memfd(message);
  if (fd < 0) return write_frame(out_fd, message);
  const bool sent = send_descriptor(socket_fd, fd);
  ::close(fd);
  if (!sent) return write_frame(out_fd, message);
  ByteWriter note;
  note.bytes(kMemfdNoteMagic);
  note.u64(message.size());
  return write_frame(out_fd, note.take());
}

bool is_memfd_note(std::string_view frame) {
  return frame.size() == kMemfdNoteMagic.size() + 8 &&
         frame.substr(0, kMemfdNoteMagic.size()) == kMemfdNoteMagic;
}

bool receive_memfd_frame(int socket_fd, std::string& frame) {
  ByteReader r(frame, "memfd note");
  r.bytes(kMemfdNoteMagic.size(), "magic");
  const uint64_t size = r.u64("size");
  int fd = receive_descriptor(socket_fd);
  if (fd < 0) return false;
  struct stat st;
  // Sealed: nobody can write, shrink or grow it any more.
  const int seals = ::fcntl(fd, F_GET_SEALS);
  bool ok = seals >= 0 && (seals & kMemfdSeals) == kMemfdSeals && ::fstat(fd, &st) == 0 &&
            static_cast<uint64_t>(st.st_size) == size && size <= kMaxFrameBytes;
  if (ok) {
    frame.resize(size);
    size_t have = 0;
    while (have < size) {
      ssize_t got = ::pread(fd, &frame[have], size - have, static_cast<off_t>(have));
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) break;
      have += static_cast<size_t>(got);
    }
    ok = have == size;
  }
  ::close(fd);
  return ok;
}

Frame read_frame(int fd, std::string& message) {
  auto read_exactly = [fd](char* buf, size_t n) {
    size_t have = 0;
    while (have < n) {
      ssize_t got = ::read(fd, buf + have, n - have);
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) break;
      have += static_cast<size_t>(got);
    }
    return have;
  };
  unsigned char size[4];
  size_t got = read_exactly(reinterpret_cast<char*>(size), 4);
  if (got == 0) return Frame::eof;
  if (got < 4) return Frame::bad;
  uint32_t n = size[0] | size[1] << 8 | size[2] << 16 | static_cast<uint32_t>(size[3]) << 24;
  if (n > kMaxFrameBytes) return Frame::bad;
  message.resize(n);
  return read_exactly(&message[0], n) == n ? Frame::ok : Frame::bad;
}

NvrtcOutput compile_in_worker(const std::vector<std::string>& argv, const std::string& nvrtc_path,
                              const NvrtcInput& input) {
  std::string request = encode_worker_request(nvrtc_path, input);
  Fd to_child_read, to_child_write, from_child_read, from_child_write;
  int p1[2], p2[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, p1) != 0) {
    throw IoError(errno_message("cannot create a socket pair", "", errno));
  }
  *to_child_read.out() = p1[0];
  *to_child_write.out() = p1[1];
  if (::pipe2(p2, O_CLOEXEC) != 0) throw IoError(errno_message("cannot create a pipe", "", errno));
  *from_child_read.out() = p2[0];
  *from_child_write.out() = p2[1];

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, to_child_read.get(), 0);
  posix_spawn_file_actions_adddup2(&actions, from_child_write.get(), 1);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid;
  int rc = ::posix_spawn(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) throw IoError(errno_message("cannot start the NVRTC worker", argv[0], rc));
  to_child_read.reset();
  from_child_write.reset();

  // The child reads the whole request before it writes: no deadlock.
  write_all(to_child_write.get(), request, /*socket=*/true);
  to_child_write.reset();
  std::string response = read_all(from_child_read.get());
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return decode_worker_response(response, status, input);
}

NvrtcOutput decode_worker_response(const std::string& response, int status,
                                   const NvrtcInput& input) {
  const std::string who = "the NVRTC worker compiling " + input.source_name;
  if (status == kWorkerGone && response.empty()) {
    throw Error(ErrorKind::compile_failed,
                who + " died without an answer; NVRTC crashed, ran out of memory or was killed");
  }
  if (status != kWorkerGone && WIFSIGNALED(status)) {
    throw Error(ErrorKind::compile_failed,
                who + " died of signal " + std::to_string(WTERMSIG(status)) + " (" +
                    strsignal(WTERMSIG(status)) + "); NVRTC crashed or ran out of memory");
  }

  ByteReader r(response, who + "'s answer");
  if (response.size() < kResponseMagic.size() ||
      r.bytes(kResponseMagic.size(), "magic") != kResponseMagic) {
    throw Error(ErrorKind::compile_failed,
                who + " gave no answer" +
                    (status == kWorkerGone
                         ? std::string()
                         : " (exit status " + std::to_string(WEXITSTATUS(status)) + ")"));
  }
  uint8_t result = r.u8("status");
  if (result == kCompileError) {
    std::string message(r.str("message"));
    CompileError e(message, std::string(r.str("log")), input.options);
    std::vector<std::string> probes = r.strs("probes");
    e.set_probes(std::move(probes), static_cast<int64_t>(r.u64("start time")));
    throw e;
  }
  if (result == kOtherError) {
    auto kind = static_cast<ErrorKind>(r.u8("error kind"));
    std::string message(r.str("message"));
    switch (kind) {  // the same type the child threw, so callers can catch it
      case ErrorKind::io:
        throw IoError(message);
      case ErrorKind::corrupt:
        throw CorruptError(message);
      case ErrorKind::incompatible_version:
        throw IncompatibleVersionError(message);
      case ErrorKind::invalid_argument:
        throw InvalidArgument(message);
      case ErrorKind::not_found:
        throw NotFound(message);
      default:
        throw Error(kind, message);
    }
  }
  NvrtcOutput out;
  out.image = std::string(r.str("image"));
  out.log = std::string(r.str("log"));
  out.ms = static_cast<double>(r.u64("microseconds")) / 1000;
  out.lowered_names = cache::read_lowered_names(r);
  out.ptx = std::string(r.str("PTX"));
  out.sealed = r.u8("sealed") != 0;
  out.unsealed_why = std::string(r.str("why not sealed"));
  out.probes = r.strs("probes");
  out.started_ns = static_cast<int64_t>(r.u64("start time"));
  if (r.u8("has program answers") != 0) {
    out.program = cache::ProgramRecord::decode(r.str("program answers"), who + "'s answers");
  }
  uint32_t served = r.u32("served file count");
  if (served > r.remaining() / 60) r.fail("served file count past the end");
  for (uint32_t i = 0; i < served; ++i) {
    ServedFile f;
    f.path = std::string(r.str("served file"));
    f.content.high = r.u64("served hash");
    f.content.low = r.u64("served hash");
    f.dev = r.u64("served stat");
    f.ino = r.u64("served stat");
    f.size = r.u64("served stat");
    f.mtime_ns = r.u64("served stat");
    f.ctime_ns = r.u64("served stat");
    out.served.push_back(std::move(f));
  }
  out.relative_names = r.strs("relative names");
  out.absolute_names = r.strs("absolute names");
  out.hidden = r.strs("hidden names");
  r.expect_end();
  return out;
}

}  // namespace kcache::compiler
