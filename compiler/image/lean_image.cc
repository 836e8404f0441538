#include "compiler/image/lean_image.h"

#include "common/error.h"
#include "compiler/image/lean_ptx.h"
#include "compiler/image/nvjitlink.h"

namespace kcache::compiler {
namespace {

bool starts_with(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

// NVRTC options that act before PTX (the front end and NVVM) and so have
// nothing to tell ptxas: the PTX already carries their effect.
constexpr const char* kFrontEndOnly[] = {"-std=",
                                         "--std=",
                                         "-D",
                                         "-U",
                                         "--define-macro",
                                         "--undefine-macro",
                                         "-use_fast_math",
                                         "--use_fast_math",
                                         "-ftz=",
                                         "--ftz=",
                                         "-prec-div=",
                                         "--prec-div=",
                                         "-prec-sqrt=",
                                         "--prec-sqrt=",
                                         "-fmad=",
                                         "--fmad=",
                                         "-default-device",
                                         "--device-as-default-execution-space",
                                         "-w",
                                         "--disable-warnings",
                                         "-restrict",
                                         "--restrict",
                                         "-expt-relaxed-constexpr",
                                         "--expt-relaxed-constexpr",
                                         "-expt-extended-lambda",
                                         "--expt-extended-lambda",
                                         "-extended-lambda",
                                         "--extended-lambda",
                                         "-diag-",
                                         "--diag-",
                                         "-Wno-",
                                         "-Werror",
                                         "--Werror",
                                         "-Wreorder",
                                         "-builtin-",
                                         "--builtin-",
                                         "-extra-device-vectorization",
                                         "--extra-device-vectorization",
                                         "-dopt=",
                                         "--dopt=",
                                         "-fdevice-syntax-only",
                                         "-no-source-include",
                                         "--no-source-include",
                                         "-pch",
                                         "--pch",
                                         "-create-pch",
                                         "-use-pch",
                                         "-pch-dir",
                                         "-instantiate-templates-in-pch",
                                         "-pch-verbose",
                                         "-pch-messages",
                                         "-device-int128",
                                         "--device-int128",
                                         "-minimal",
                                         "--minimal",
                                         "-split-compile",
                                         "--split-compile",
                                         "-time",
                                         "--time",
                                         "-fdevice-time-trace",
                                         "-jump-table-density"};

}  // namespace

std::optional<std::vector<std::string>> link_options(const std::string& arch,
                                                     const std::vector<std::string>& options,
                                                     std::string* why) {
  std::vector<std::string> out{"-arch=" + arch};
  for (const std::string& o : options) {
    if (o == "-lineinfo" || o == "--generate-line-info") {
      out.push_back("-lineinfo");
    } else if (starts_with(o, "-maxrregcount=") || starts_with(o, "--maxrregcount=")) {
      out.push_back("-maxrregcount=" + o.substr(o.find('=') + 1));
    } else if (starts_with(o, "-Xptxas=") || starts_with(o, "--ptxas-options=")) {
      out.push_back("-Xptxas=" + o.substr(o.find('=') + 1));
    } else {
      bool front_end = false;
      for (const char* p : kFrontEndOnly) front_end = front_end || starts_with(o, p);
      if (!front_end) {
        if (why) *why = "the NVRTC option " + o + " has no nvJitLink equivalent here";
        return std::nullopt;
      }
    }
  }
  return out;
}

LeanRecord LeanImage::record() const {
  if (lean) {
    return LeanRecord{LeanRecord::kAsked | LeanRecord::kLean, bytes_removed, variables_removed};
  }
  constexpr uint8_t kDeclined = LeanRecord::kAsked | LeanRecord::kDeclined;
  return LeanRecord{note.empty() ? LeanRecord::kAsked : kDeclined, 0, 0};
}

LeanImage make_lean_image(const LeanInput& input) {
  LeanImage out;
  out.image = input.nvrtc_image;
  const bool cubin = input.kind == cache::TargetKind::cubin;
  std::optional<std::vector<std::string>> options;
  if (cubin) {
    if (input.ptx.empty()) {
      out.note = "NVRTC gave no PTX to make a lean cubin from";
      return out;
    }
    std::string why;
    options = link_options(input.arch, input.options, &why);
    if (!options) {
      out.note = why + "; kept NVRTC's cubin";
      return out;
    }
  }
  const std::string& ptx = cubin ? input.ptx : input.nvrtc_image;
  LeanPtx lean = lean_ptx(ptx, input.keep);
  if (lean.host_nameable_kept > 0 && !input.texts.empty()) {
    // Reading the text costs more than the PTX pass: only where it can decide something.
    const ClassConstants classes(input.texts, input.options);
    lean = lean_ptx(ptx, input.keep, &classes);
  }
  if (!lean.changed) {
    out.note = lean.why;  // empty when there was simply nothing to remove
    return out;
  }
  if (!cubin) {
    out.image = std::move(lean.ptx);
  } else {
    try {
      out.image = NvJitLink::open(input.nvjitlink_path).ptx_to_cubin(lean.ptx, *options);
    } catch (const Error& e) {
      out.note = std::string(e.what()) + "; kept NVRTC's cubin";
      return out;
    }
  }
  out.lean = true;
  out.bytes_removed =
      static_cast<int64_t>(input.nvrtc_image.size()) - static_cast<int64_t>(out.image.size());
  out.variables_removed = static_cast<uint32_t>(lean.variables_removed);
  return out;
}

}  // namespace kcache::compiler
