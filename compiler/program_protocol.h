// The drop-in host's requests to kcache's compile processes and their
// answers (program_service.h says why the compile runs there): the encodings
// alone, which the host links without the compiler or the store.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "compiler/program_api.h"

namespace kcache::compiler {

struct ProgramRequest {
  ProgramSource program;
  std::vector<std::string> options;  // as the program passed them
  bool lean = false;
  std::string nvrtc_path;   // the real NVRTC, compiled with and identified
  std::string working_dir;  // the host's, absolute
};

// What the host gets back: the result, or why the real NVRTC must answer.
struct ProgramAnswer {
  std::optional<ProgramResult> result;
  std::string error;  // empty with a result
  // Messages for the host to say once (cache settings it could not use).
  std::vector<std::string> notices;
  // Why NVRTC cannot be sealed in the compile processes (nothing is
  // stored), or empty: the one reason behind every such answer.
  std::string unsealed;
};

std::string encode_program_request(const ProgramRequest& request);
// Throws CorruptError for bytes that are not one.
ProgramRequest decode_program_request(std::string_view bytes);
// Whether `bytes` is a program request (and not an NVRTC worker request).
bool is_program_request(std::string_view bytes);
std::string encode_program_answer(const ProgramAnswer& answer);
// Throws CorruptError for bytes that are not one.
ProgramAnswer decode_program_answer(std::string_view bytes);

}  // namespace kcache::compiler
