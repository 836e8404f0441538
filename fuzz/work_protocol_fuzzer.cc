// Fuzzes the persistent worker's protocol decoding (cli/work_protocol.h): the
// bytes Bazel, or anything else holding the worker's stdin, writes. Beyond
// "no crash, no sanitizer report, only kcache::Error on bad input", checks
// that an accepted request encodes back to a request that decodes the same,
// and that read_frame() on a pipe stays within kMaxMessageBytes.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "cli/work_protocol.h"
#include "common/error.h"

namespace {

void check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "work_protocol_fuzzer: broken promise: %s\n", what);
    std::abort();
  }
}

void check_frames(const std::string& bytes) {
  if (bytes.size() > 60000) return;  // fits a pipe's buffer: no writer thread
  int p[2];
  if (::pipe(p) != 0) return;
  if (::write(p[1], bytes.data(), bytes.size()) != static_cast<ssize_t>(bytes.size())) {
    ::close(p[0]);
    ::close(p[1]);
    return;
  }
  ::close(p[1]);
  std::string message;
  try {
    while (kcache::cli::read_frame(p[0], message)) {
      check(message.size() <= kcache::cli::kMaxMessageBytes, "frame within the limit");
      try {
        kcache::cli::decode_work_request(message);
      } catch (const kcache::CorruptError&) {
      }
    }
  } catch (const kcache::CorruptError&) {
  }
  ::close(p[0]);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string bytes(reinterpret_cast<const char*>(data), size);
  try {
    kcache::cli::WorkRequest r = kcache::cli::decode_work_request(bytes);
    std::string frame = kcache::cli::encode_work_request(r);
    // Skip the length prefix: decode takes the body.
    size_t body = 0;
    while (static_cast<uint8_t>(frame[body]) & 0x80) ++body;
    kcache::cli::WorkRequest again = kcache::cli::decode_work_request(frame.substr(body + 1));
    check(again.arguments == r.arguments, "arguments round-trip");
    check(again.inputs == r.inputs, "inputs round-trip");
    check(r.inputs.size() <= kcache::cli::kMaxInputs, "inputs within the limit");
    check(again.request_id == r.request_id && again.cancel == r.cancel, "fields round-trip");
  } catch (const kcache::CorruptError&) {
    // What bad input must give.
  }
  try {
    kcache::cli::decode_work_response(bytes);
  } catch (const kcache::CorruptError&) {
  }
  check_frames(bytes);
  return 0;
}
