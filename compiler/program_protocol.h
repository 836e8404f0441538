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
  // The host's $PWD as set (empty: unset). NVRTC writes the working folder
  // as $PWD spells it into -lineinfo / -G outputs, so the compile runs
  // under the host's spelling, not the compile process's.
  std::string pwd;
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

// The frame a compile process sends before its answer where the lookup
// missed and NVRTC starts: the host then waits a compile's bound instead of
// a lookup's.
std::string encode_program_progress();
bool is_program_progress(std::string_view frame);

// How long the host waits for a compile process before it gives it up as
// wedged (killed; the real NVRTC answers, said once):
// - its first frame (the answer, or "NVRTC starts") within kLookupBoundMs:
//   a lookup costs milliseconds, but the first one of a process opens the
//   store (an index rebuilt from its blob files) and a remote may take its
//   own timeout (10 s by default), on a machine that may be loaded;
// - after "NVRTC starts", the answer within kNvrtcFloorMs; past that the
//   host also compiles the program with the real NVRTC, on a thread of its
//   own, timing it (t), and gives the compile process kNvrtcMultiple * t
//   more (at least kNvrtcMinExtraMs): it had the floor, t and that, against
//   NVRTC alone's t (its own compile is sealed, and its name check compiles
//   a second time at once). Whenever it answers, its answer (stored for the
//   next process) is used at once and the host's compile ends unused; if it
//   never does, the host's is the answer. Only a miss slower than the floor
//   costs that second compile, in CPU, not in time.
constexpr int kLookupBoundMs = 30000;
constexpr int kNvrtcFloorMs = 20000;
constexpr int kNvrtcMultiple = 3;
constexpr int kNvrtcMinExtraMs = 2000;
// Throws CorruptError for bytes that are not one.
ProgramAnswer decode_program_answer(std::string_view bytes);

}  // namespace kcache::compiler
