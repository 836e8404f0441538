#include "compiler/compiler_parts.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <exception>
#include <functional>
#include <future>
#include <mutex>
#include <set>
#include <thread>

#include "bundle/bundle.h"
#include "cache/format/lookup_note.h"
#include "cache/format/manifest.h"
#include "cache/format/program_record.h"
#include "common/arch.h"
#include "common/bytes.h"
#include "common/error.h"
#include "common/file_system.h"
#include "common/hash.h"
#include "common/paths.h"
#include "compiler/compiler.h"
#include "compiler/image/lean_image.h"
#include "compiler/includes.h"
#include "compiler/lookup_record.h"
#include "compiler/nvrtc/nvrtc.h"
#include "compiler/nvrtc/nvrtc_pool.h"
#include "compiler/nvrtc/nvrtc_worker.h"
#include "compiler/nvrtc/pch.h"
#include "compiler/seal/probes.h"
#include "compiler/seal/seal.h"
#include "compiler/served_keys.h"
#include "compiler/time_macros.h"
#include "compiler/undeclared.h"

namespace kcache::compiler {

namespace parts {

std::string folder_of(const std::string& path) {
  return has_folder(path) ? parent_folder(path) : std::string();  // a bare name: none
}

std::string absolute_path(const std::string& path) {
  if (!path.empty() && path.front() == '/') return path;
  char cwd[PATH_MAX];
  if (!::getcwd(cwd, sizeof cwd)) return path;
  return path.empty() ? std::string(cwd) : std::string(cwd) + "/" + path;
}

Hash128 full_key(cache::CompileRequest request, const cache::ManifestSet& set) {
  request.probes = probe_key_lines(set.probes);
  std::sort(request.headers.begin(), request.headers.end(),
            [](const cache::Header& a, const cache::Header& b) {
              return a.include_name < b.include_name;
            });
  return cache::compute_key(request);
}

// ccache's rule for the time macros (time_macros.h), over scanned headers.
bool any_uses_time_macros(const std::vector<ResolvedHeader>& headers) {
  return std::any_of(headers.begin(), headers.end(),
                     [](const ResolvedHeader& h) { return uses_time_macros(h.content); });
}
bool any_uses_date_macro(const std::vector<ResolvedHeader>& headers) {
  return std::any_of(headers.begin(), headers.end(),
                     [](const ResolvedHeader& h) { return uses_date_macro(h.content); });
}

// How the scanner reads a file compiled with these options: NVRTC 13
// replaces trigraphs with -std=c++03, c++11 and c++14 only (measured).
ScanOptions scan_options(const CompileOptions& options) {
  ScanOptions s;
  s.trigraphs = options.std == "c++03" || options.std == "c++11" || options.std == "c++14";
  return s;
}

}  // namespace parts

}  // namespace kcache::compiler
