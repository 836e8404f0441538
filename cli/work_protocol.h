// Bazel's persistent-worker protocol (Bazel 4.2.3, protobuf flavour): the
// subset of worker_protocol.proto kcache reads and writes, hand-coded so that
// the `kcache` binary links no libprotobuf (a hit's start-up stays small).
//
// Why protobuf and not JSON: Bazel 4.2.3 speaks protobuf to any worker, and
// JSON only with --experimental_worker_allow_json_protocol on every user's
// command line; two flat messages are little code to read by hand.
//
// Grammar (protobuf wire format; field numbers from worker_protocol.proto):
//   stream      := frame*
//   frame       := varint(len) message[len]          len <= kMaxMessageBytes
//   message     := field*
//   field       := varint(tag = number << 3 | wire_type) value
//   value       := varint                              wire_type 0
//                | fixed64                             wire_type 1
//                | varint(n) byte[n]                   wire_type 2
//                | fixed32                             wire_type 5
//   varint      := byte{1..10}, 7 bits each, low first, high bit = more
//   WorkRequest:  1 arguments   (string, repeated)
//                 2 inputs      (Input, repeated; at most kMaxInputs)
//                 3 request_id  (int32)
//                 4 cancel      (bool)
//                 5 verbosity   (int32; skipped)
//                 6 sandbox_dir (string; skipped)
//                 anything else: skipped by wire type (groups 3/4 rejected)
//   Input:        1 path        (string: execroot-relative, as Bazel's exec path)
//                 2 digest      (bytes; Bazel 4 sends the hex digest's characters)
//                 anything else: skipped by wire type
//   WorkResponse: 1 exit_code (int32), 2 output (string), 3 request_id (int32),
//                 4 was_cancelled (bool)
// A field with the wrong wire type for its number, a truncated value, a
// varint over 10 bytes or a length past the end is CorruptError.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kcache::cli {

// Requests carry a kernel's flags, not its source: 16 MiB is generous.
constexpr uint64_t kMaxMessageBytes = 16u << 20;
// An action's inputs: its source, headers and tools. The bound keeps a 16 MiB
// message of empty inputs from taking 32 times that in memory.
constexpr size_t kMaxInputs = 1u << 18;

// One file the action declared (WorkRequest.inputs).
struct WorkInput {
  std::string path;    // execroot-relative, e.g. "kernels/util.cuh"
  std::string digest;  // as Bazel sent it; kcache does not use it
  bool operator==(const WorkInput& o) const { return path == o.path && digest == o.digest; }
};

struct WorkRequest {
  std::vector<std::string> arguments;
  // Empty from a Bazel that sends none, and from tests driving the worker by
  // hand: then the request may read any file (see cli/declared_inputs.h).
  std::vector<WorkInput> inputs;
  int32_t request_id = 0;
  bool cancel = false;
};

struct WorkResponse {
  int32_t exit_code = 0;
  std::string output;
  int32_t request_id = 0;
  bool was_cancelled = false;
};

// One message body (without its length prefix). Throws CorruptError.
WorkRequest decode_work_request(std::string_view message);
// One frame: the length prefix and the body.
std::string encode_work_response(const WorkResponse& response);
// For tests and the fuzzer: the inverse of each.
std::string encode_work_request(const WorkRequest& request);
WorkResponse decode_work_response(std::string_view message);

// Reads one frame's body from `fd`. Returns false on EOF before the first
// byte (Bazel closed stdin: the worker should exit); throws CorruptError on a
// truncated frame or a length over kMaxMessageBytes, IoError on a read error.
bool read_frame(int fd, std::string& message);
// Writes all of `bytes` to `fd`; throws IoError.
void write_all_to(int fd, std::string_view bytes);

}  // namespace kcache::cli
