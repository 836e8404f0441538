// NVRTC's automatic precompiled headers (CUDA 12.8+), for long-lived
// processes (`kcache compile --persistent_worker`, `kcache prewarm`).
//
// A PCH is only valid inside the NVRTC instance that made it, so it pays only
// where one process compiles many kernels: the first kernel with a given
// include prefix creates one under `pch_dir`, later ones with the same prefix
// load it (a CUB kernel: 2.3 s -> 0.3 s). The output is byte-identical to a
// plain compile, and the PCH options never enter a key (the key hashes
// canonical_options(), not what NVRTC is handed).
#pragma once

#include <ctime>
#include <string>
#include <string_view>

#include "compiler/nvrtc/nvrtc.h"

namespace kcache::compiler {

// Compiles `input` with -pch -pch-dir=`pch_dir` added. NVRTC's own PCH
// messages are removed from the log; if NVRTC fails with PCH on, compiles once
// more without it, so a PCH problem costs time, never a result: a source that
// is really wrong fails with the plain compile's log and options.
NvrtcOutput compile_with_pch(const Nvrtc& nvrtc, const NvrtcInput& input,
                             const std::string& pch_dir);

// What a PCH froze from the compile that made it must match where it is
// used (issue 27): NVRTC reuses a PCH for any source with the same prefix and
// options, but expanded __BASE_FILE__ (the maker's source name) and __DATE__
// / __TIME__ when it made it. Where the maker's inputs (source, handed
// headers, options, the toolkit headers it read) use __BASE_FILE__, the PCH
// serves only the same source name; __DATE__, only the same date; __TIME__,
// no other compile. Otherwise the PCH is dropped and made again (a PCH whose
// prefix uses none of them still serves every source: prewarm's speed-up).
//
// Served (NvrtcInput::serve_disk): NVRTC that uses a PCH opens none of the
// headers it froze, so the seal serves none of them. The maker's whole read
// set (every file it was served but its own source, with its bytes' hash and
// stat, and every path it named) is remembered per PCH, in this process, and
// a compile that uses the PCH gets it in its NvrtcOutput as if NVRTC had read
// it: its key covers every file the PCH froze. Only a maker whose source
// reads nothing past its leading directives lends its PCH, and only to a
// source with the same leading directives. Before each compile, a PCH any of
// whose files changed (a stat that stands for the bytes, common/stamp_trust.h,
// else the bytes hashed again) is deleted, so NVRTC makes it again. A served
// PCH serves only compiles from the same working folder and source folder.
//
// The part of `source` NVRTC's PCH may cover at most: its leading run of
// preprocessing directives, blank lines and comments (a line continued with a
// backslash belongs to its directive). Two compiles with the same options
// share a PCH only where these are equal, so a pool routes by them
// (nvrtc_pool.h) and prewarm counts its kernels by them.
std::string_view pch_prefix(std::string_view source);

// For tests: the clock a PCH's date is read from (null: the real one).
void set_pch_clock_for_testing(std::time_t (*clock)());

// For tests: how many compiles in this process used a PCH kcache made here.
int pch_uses_for_testing();

// `log` without the lines NVRTC writes about the PCH itself: its status lines
// ("X": creating/using precompiled header file "`pch_dir`/..."), its PCH
// warnings (a diagnostic whose text is about a precompiled header, e.g.
// #630-D, #20282-D) and its "PCH heap" warnings. Every other line is kept.
std::string strip_pch_messages(std::string_view log, const std::string& pch_dir);

}  // namespace kcache::compiler
