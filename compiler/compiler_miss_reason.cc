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
#include "compiler/compiler.h"
#include "compiler/compiler_parts.h"
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
namespace {

// What `now` has that `before` has not: "-DN=4", "-DN=4; dropped -DN=3".
std::string options_changed(const std::vector<std::string>& before,
                            const std::vector<std::string>& now) {
  std::string added, dropped;
  for (const std::string& o : now) {
    if (std::find(before.begin(), before.end(), o) == before.end())
      added += (added.empty() ? "" : " ") + o;
  }
  for (const std::string& o : before) {
    if (std::find(now.begin(), now.end(), o) == now.end())
      dropped += (dropped.empty() ? "" : " ") + o;
  }
  if (added.empty() && dropped.empty()) return "their order";
  std::string out = added + (added.empty() || dropped.empty() ? "" : "; ") +
                    (dropped.empty() ? "" : "dropped " + dropped);
  constexpr size_t kMaxShown = 120;  // one line of a summary
  return out.size() > kMaxShown ? out.substr(0, kMaxShown - 3) + "..." : out;
}

// A path as a user reads it: beneath the working folder relative to it.
std::string as_user_reads(const std::string& path) {
  char cwd[PATH_MAX];
  const std::string here = ::getcwd(cwd, sizeof cwd) ? cwd : "";
  if (here.size() > 1 && path.compare(0, here.size() + 1, here + "/") == 0) {
    return path.substr(here.size() + 1);
  }
  return path;
}

// The first header (in `now`'s order) that differs from `before`:
// "inc/v.h changed", "inc/w.h is included now", "inc/x.h is no longer included".
std::string headers_changed(const std::vector<std::pair<std::string, uint64_t>>& before,
                            const std::vector<std::pair<std::string, uint64_t>>& now) {
  auto find = [](const std::vector<std::pair<std::string, uint64_t>>& in, const std::string& p) {
    return std::find_if(in.begin(), in.end(), [&p](const auto& h) { return h.first == p; });
  };
  for (const auto& [path, hash] : now) {
    auto was = find(before, path);
    if (was == before.end()) return as_user_reads(path) + " is included now";
    if (was->second != hash) return as_user_reads(path) + " changed";
  }
  for (const auto& [path, hash] : before) {
    if (find(now, path) == now.end()) return as_user_reads(path) + " is no longer included";
  }
  return "the headers' order";
}

}  // namespace

namespace parts {

// A miss's reason where nothing stored matched: what changed since the last
// stored compile of the source (`last`), whose lookup started from `now`.
std::string since_note(const std::optional<cache::LookupNote>& last, const cache::LookupNote& now,
                       const CompileOptions& options, const Target& t) {
  if (!last) return "new source";
  if (last->toolkit != now.toolkit) return "toolkit changed";
  if (last->source_hash != now.source_hash) {
    // NVRTC's name for an unnamed program (CuPy names none under `kcache
    // run`) is shared by unrelated programs: another source is a new one.
    if (options.logical_name() == "default_program") return "new source";
    return options.logical_name() + " changed";
  }
  if (last->headers != now.headers) return headers_changed(last->headers, now.headers);
  if (last->options != now.options) {
    return "options changed: " + options_changed(last->options, now.options);
  }
  if (std::find(last->targets.begin(), last->targets.end(), t.arch) == last->targets.end()) {
    return "new target " + t.arch;
  }
  return parts::kNotInStore;
}

}  // namespace parts

Hash128 Compiler::note_key(const CompileOptions& options) const {
  ByteWriter w;
  w.str("kcache lookup note v1");
  w.str(options.source_path);
  w.str(options.logical_name());
  w.str(compile_folder(options.working_folder));
  w.u8(options.program ? 1 : 0);
  return xxh3_128(w.data());
}

cache::LookupNote Compiler::lookup_note(const CompileOptions& options, const Prepared& p) const {
  cache::LookupNote note;
  note.key = note_key(options);
  note.source_hash = xxh3_128(p.source);
  note.toolkit = keyed_identity_ + "; " + p.request.image_pass;
  note.options = p.request.options;
  for (const std::string& e : options.name_expressions) {
    note.options.push_back("--name-expression=" + e);
  }
  for (const Target& t : p.targets) note.targets.push_back(t.arch);
  for (const ResolvedHeader& h : p.includes.headers) {
    note.headers.emplace_back(h.path.empty() ? h.name : parts::absolute_path(h.path),
                              xxh3_64(h.content));
  }
  return note;
}

void Compiler::add_reasons_since_note(const CompileOptions& options, const Prepared& p,
                                      std::vector<TargetResult>* targets) const {
  if (!storage_ || !storage_->local()) return;
  std::optional<cache::LookupNote> last;
  bool read = false;
  for (TargetResult& r : *targets) {
    if (r.hit || !r.miss_reason.empty()) continue;
    if (!read) last = cache::read_lookup_note(storage_->local()->dir(), note_key(options));
    read = true;
    r.miss_reason = parts::since_note(last, lookup_note(options, p), options, r.target);
  }
}

// After a stored miss: the note a later miss of this source compares with.
void Compiler::write_note(const CompileOptions& options, const Prepared& p) {
  cache::Store* local = storage_ ? storage_->local() : nullptr;
  if (!local || local->read_only()) return;
  try {
    cache::write_lookup_note(local->dir(), lookup_note(options, p));
  } catch (const Error&) {
    // A reason less precise later, nothing worse: no warning for it.
  }
}

}  // namespace kcache::compiler
