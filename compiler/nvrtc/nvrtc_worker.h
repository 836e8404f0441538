// NVRTC compiles in a child process.
//
// Why: NVRTC 13.0 serializes nvrtcCompileProgram across the threads of one
// process (measured: a second thread accrues no CPU time until the first
// compile returns, warm or not), so compiling N archs in N threads takes as
// long as one after another. N processes compile in parallel. A child also
// keeps an NVRTC crash from taking the caller down.
//
// The child is an executable (the `kcache` binary, through a hidden verb)
// that calls run_nvrtc_worker(): it reads one request on stdin, compiles, and
// writes one response on stdout. Both are private to one kcache build (the
// parent execs its own binary), framed with a magic and checked for length.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "compiler/nvrtc/nvrtc.h"

namespace kcache::compiler {

// Runs `argv` (argv[0] an absolute path; the request follows on its stdin)
// and returns what it compiled. Throws what the child threw (CompileError with
// NVRTC's log, or Error of the same kind), or Error if the child died or
// answered nonsense.
NvrtcOutput compile_in_worker(const std::vector<std::string>& argv, const std::string& nvrtc_path,
                              const NvrtcInput& input);

// The child side: reads a request from `in_fd`, writes the response to
// `out_fd`. Returns the process exit code (0 whenever a response was written,
// compile errors included).
int run_nvrtc_worker(int in_fd, int out_fd);

// The long-lived child (NvrtcPool, nvrtc_pool.h): reads framed requests from
// `in_fd` and writes a framed response for each, until EOF. With `pch_dir`
// non-empty, compiles reuse NVRTC's precompiled headers there (pch.h).
// Returns 0 at EOF, 1 on a broken frame or a failed write.
// `idle_exit_ms` > 0: ends after that long without a request (a worker of a
// program that adopts orphans: NvrtcPool). `other`: answers a request of
// another kind (the drop-in's whole program compiles, program_service.h), or
// nothing for one it does not know, which is then an NVRTC request.
// `after_answer`: runs once each answer is written, while the asking side
// already has it (the drop-in's counters written where `kcache -s` sees them).
using OtherRequests = std::function<std::optional<std::string>(std::string_view request)>;
int run_nvrtc_worker_loop(int in_fd, int out_fd, const std::string& pch_dir, int idle_exit_ms = 0,
                          const OtherRequests& other = nullptr,
                          const std::function<void()>& after_answer = nullptr);

// A request that starts with this is compiled without PCH (the rest is the
// request): the pool sends it where no other compile would use the PCH it
// would make (making one costs more than a plain compile), so the child's
// PCH for other options stays.
constexpr std::string_view kNoPchMark = "KCNOPCH1";

// The first frame a looping worker writes, before any request: the pool
// waits for it (a binary that is not kcache's worker never writes it).
constexpr std::string_view kWorkerHello = "kcache nvrtc worker";

// Framing for the loop: frame := u32 little-endian length, then that many
// bytes (a request or response as above); length <= kMaxFrameBytes.
constexpr uint32_t kMaxFrameBytes = 1u << 30;
enum class Frame { ok, eof, bad };
Frame read_frame(int fd, std::string& message);
// `socket`: the fd is a socket (send() with MSG_NOSIGNAL: a dead reader is
// a failed write, not SIGPIPE).
bool write_frame(int fd, std::string_view message, bool socket = false);

// A frame of at least kMemfdFrameBytes (a pipe's default capacity, which
// a larger one would fill and refill, a round of scheduling each time: a
// 315 KB program answer took five) travels in a sealed memfd instead: the
// sender writes it there, seals it (no write, no resize, ever again), sends
// the descriptor over `socket_fd`, a Unix socket to the reader (a looping
// worker's stdin: the pool's socket pair), and writes a small frame saying
// so on `out_fd`. Falls back to the frame itself where no memfd can be made.
constexpr size_t kMemfdFrameBytes = 64 << 10;
bool write_large_frame(int socket_fd, int out_fd, std::string_view message);
// Whether `frame` is write_large_frame's note; then receive_memfd_frame
// replaces it by the frame it stands for, received from `socket_fd`, or
// returns false (no descriptor, not a sealed memfd, another size).
bool is_memfd_note(std::string_view frame);
bool receive_memfd_frame(int socket_fd, std::string& frame);

// The status decode_worker_response is given for a worker that is not this
// process's child (NvrtcPool's): its wait status is nobody's to read here.
constexpr int kWorkerGone = -1;

// The parent's reading of a child's answer: the output, or what the child
// threw (see compile_in_worker). `status` is the child's wait status, or 0
// while it lives.
NvrtcOutput decode_worker_response(const std::string& response, int status,
                                   const NvrtcInput& input);

// The request and response encodings, exposed for tests.
std::string encode_worker_request(const std::string& nvrtc_path, const NvrtcInput& input);
void decode_worker_request(std::string_view bytes, std::string& nvrtc_path, NvrtcInput& input);

}  // namespace kcache::compiler
