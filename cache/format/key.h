// The cache key: XXH3-128 over a labelled, length-prefixed serialization of
// exactly what is compiled. Two requests get the same key only if NVRTC would
// be handed the same inputs; any single field changing changes the key.
#pragma once

#include <string>
#include <vector>

#include "common/hash.h"

namespace kcache::cache {

// Bump me when the serialization below changes or when something new must be
// keyed: every existing key then misses instead of returning a stale image.
// 2 (issue 18): what the sealed NVRTC read from the toolkit's folders and
// found absent is keyed (`probes`); an older key cannot tell.
constexpr int kKeySchemaVersion = 2;

enum class TargetKind {
  ptx,    // PTX for a virtual arch, "compute_90"
  cubin,  // machine code for a real arch, "sm_90", "sm_90a"
};

const char* to_string(TargetKind kind);

struct Header {
  std::string include_name;  // as resolved, e.g. "util/math.cuh"
  std::string content;       // the exact bytes handed to NVRTC
};

struct CompileRequest {
  // NVRTC and toolkit identity, e.g. "nvrtc 13.0 toolkit 13.0 lib=<fingerprint>":
  // a different compiler never shares a key.
  std::string compiler_identity;
  TargetKind target = TargetKind::cubin;
  std::string arch;                  // "sm_90", "compute_90"
  std::vector<std::string> options;  // canonical NVRTC options, arch option excluded
  std::string source_name;           // logical name NVRTC reports in diagnostics
  std::string source;                // main source bytes
  std::vector<Header> headers;       // every user header actually reached, sorted by name
  std::vector<std::string> name_expressions;
  // The pass that turned NVRTC's output into the stored image, with the
  // identity of the tools it ran, e.g. "lean-v1; libnvJitLink.so.13 size=...";
  // empty: NVRTC's bytes exactly. Hashed only when not empty, so a key for
  // NVRTC's own bytes is the one kcache always computed (no schema bump).
  std::string image_pass;
  // The includes NVRTC asked for, in order, each "spelling\n includer\n
  // angled" (compiler/compiler.cc), for a result that needed them; hashed
  // only when not empty. With them in the key, an entry found through a
  // manifest was made by a compile that asked exactly what the replay
  // resolved, so even a forged manifest cannot lead to another's result.
  std::vector<std::string> asked_includes;
  // What the sealed NVRTC named besides the handed headers (compiler/seal/seal.h),
  // sorted: "present <path> <XXH3-128 hex>" for a toolkit header it read,
  // "absent <path>" for a path it found nothing at (a toolkit path as
  // "toolkit:<under the include root>", so moving the toolkit keeps keys).
  // Hashed only when not empty.
  std::vector<std::string> probes;
  // What __DATE__ expands to ("Nov 23 2026"), for a compile whose handed
  // input uses it (compiler/time_macros.h); hashed only when not empty.
  std::string date;
  // Stored under `sloppiness = time_macros` (cache/config.h): a header's
  // __TIME__ is found only by the seal while NVRTC compiles, after the key,
  // so such entries live under keys of their own and a strict lookup never
  // reaches one. Hashed only when set.
  bool sloppy_time_macros = false;
};

// The serialization the key hashes; exposed for tests and `kcache show`.
std::string serialize_for_key(const CompileRequest& request);

// XXH3-128 of serialize_for_key(request).
Hash128 compute_key(const CompileRequest& request);

}  // namespace kcache::cache
