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

#include <string>
#include <string_view>

#include "compiler/nvrtc.h"

namespace kcache::compiler {

// Compiles `input` with -pch -pch-dir=`pch_dir` added. NVRTC's own PCH
// messages are removed from the log; if NVRTC fails with PCH on, compiles once
// more without it, so a PCH problem costs time, never a result: a source that
// is really wrong fails with the plain compile's log and options.
NvrtcOutput compile_with_pch(const Nvrtc& nvrtc, const NvrtcInput& input,
                             const std::string& pch_dir);

// `log` without the lines NVRTC writes about the PCH itself: its status lines
// ("X": creating/using precompiled header file "`pch_dir`/..."), its PCH
// warnings (a diagnostic whose text is about a precompiled header, e.g.
// #630-D, #20282-D) and its "PCH heap" warnings. Every other line is kept.
std::string strip_pch_messages(std::string_view log, const std::string& pch_dir);

}  // namespace kcache::compiler
