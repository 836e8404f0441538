#include "compiler/pch.h"

#include "common/error.h"

namespace kcache::compiler {
namespace {

bool contains(std::string_view s, std::string_view part) {
  return s.find(part) != std::string_view::npos;
}

bool is_pch_message(std::string_view line, const std::string& pch_dir) {
  // "kernel.cu": using precompiled header file "/scratch/pch/kernel_0.pch"
  for (std::string_view verb :
       {"\": using precompiled header file \"", "\": creating precompiled header file \""}) {
    size_t at = line.find(verb);
    if (!line.empty() && line.front() == '"' && at != std::string_view::npos &&
        line.substr(at + verb.size()).compare(0, pch_dir.size(), pch_dir) == 0) {
      return true;
    }
  }
  // NVRTC's PCH diagnostics, e.g. "Warning #629-D: the command line options do
  // not match those used when precompiled header file "..." was created".
  if ((contains(line, "warning #") || contains(line, "Warning #")) &&
      contains(line, "precompiled header")) {
    return true;
  }
  // " warning: PCH heap reset failed, ..." and "warning: PCH Heap initialization ..."
  size_t start = line.find_first_not_of(' ');
  if (start != std::string_view::npos) {
    std::string_view rest = line.substr(start);
    if (rest.compare(0, 18, "warning: PCH heap ") == 0 ||
        rest.compare(0, 18, "warning: PCH Heap ") == 0) {
      return true;
    }
  }
  return false;
}

}  // namespace

std::string strip_pch_messages(std::string_view log, const std::string& pch_dir) {
  constexpr std::string_view kRemark = "Remark: The warnings can be suppressed with";
  std::string out;
  bool after_dropped = false;  // the last line that was not empty was dropped
  while (!log.empty()) {
    size_t end = log.find('\n');
    std::string_view line = log.substr(0, end == std::string_view::npos ? log.size() : end + 1);
    log.remove_prefix(line.size());
    std::string_view text = line;
    if (!text.empty() && text.back() == '\n') text.remove_suffix(1);
    // NVRTC follows a diagnostic with an empty line, and the first warning
    // with a remark on suppressing warnings: they go with it.
    bool drop = is_pch_message(text, pch_dir) ||
                (after_dropped && (text.empty() || text.compare(0, kRemark.size(), kRemark) == 0));
    if (!text.empty()) after_dropped = drop;
    if (!drop) out.append(line);
  }
  return out;
}

NvrtcOutput compile_with_pch(const Nvrtc& nvrtc, const NvrtcInput& input,
                             const std::string& pch_dir) {
  NvrtcInput with_pch = input;
  with_pch.options.push_back("-pch");
  with_pch.options.push_back("-pch-dir=" + pch_dir);
  try {
    NvrtcOutput out = nvrtc.compile(with_pch);
    out.log = strip_pch_messages(out.log, pch_dir);
    return out;
  } catch (const Error&) {
    // A PCH problem or a wrong source: the plain compile tells which.
  }
  return nvrtc.compile(input);
}

}  // namespace kcache::compiler
