#include "compiler/compiler.h"

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
#include <sys/stat.h>
#include <thread>
#include <unistd.h>

#include "bundle/bundle.h"
#include "cache/lookup_note.h"
#include "cache/manifest.h"
#include "cache/program_record.h"
#include "common/arch.h"
#include "common/bytes.h"
#include "common/error.h"
#include "common/file_system.h"
#include "common/hash.h"
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

namespace parts {

// Whether `e`, found under `key`, answers target `t`: a key collision or a
// foreign writer must never hand out a wrong image.
bool entry_answers(const CompileOptions& options, const Target& t, const Hash128& key,
                   const cache::Entry& e) {
  bool names_ok = e.lowered_names().size() == options.name_expressions.size();
  if (options.program) {
    try {  // a compile NVRTC rejected has no lowered names
      names_ok = names_ok || cache::ProgramRecord::decode(e.payload()).compile_result !=
                                 cache::kNvrtcSuccess;
    } catch (const Error&) {
      names_ok = false;  // a record this kcache cannot read: compile again
    }
  }
  return e.key() == key && e.kind() == t.kind && e.arch() == t.arch && names_ok;
}

void take_entry(const Hash128& key, cache::Entry e, TargetResult* r) {
  r->hit = true;
  r->key = key;
  r->compile_ms = e.compile_ms();
  r->lean = e.lean().lean();
  r->lean_bytes_removed = e.lean().bytes_removed;
  r->lean_variables_removed = e.lean().variables_removed;
  r->entry = std::move(e);
}

}  // namespace parts

void Compiler::look_up(const CompileOptions& options, Prepared& prepared,
                       std::vector<TargetResult>* out, bool* through_asks) {
  const IncludeGraph& includes = prepared.includes;
  cache::CompileRequest& request = prepared.request;
  const std::set<std::string> base_names = parts::handed_names(includes);
  // A program's probes in its own folder are recorded relative to it for
  // the entry of every name (settle_entry): checked in this one's.
  ProbeContext probes = probe_context_;
  if (options.program) probes.program_folder = parts::program_folder(options);
  if (options.serve && !options.program) probes.program_folder = working_folder();
  const parts::AskContext ask_context{options, includes, base_names, probes, toolkit_.include_dirs,
                               !prepared.today.empty()};
  // Per target: the scanner key; on a miss, its manifest's sets, newest
  // first, each replayed against the disk (cache/manifest.h).
  for (const Target& t : prepared.targets) {
    TargetResult r;
    r.target = t;
    request.target = t.kind;
    request.arch = t.arch;
    r.key = cache::compute_key(request);
    // Why it is no hit: the first thing found that no longer held (the
    // newest manifest set's changed path, an entry no longer stored).
    std::string why;
    auto lookup = [&](const Hash128& key) {
      // Counted by the caller, once the lookup is decided (count_lookups).
      if (std::optional<cache::Entry> e = storage_->get(key, cache::Store::Access::uncounted)) {
        if (parts::entry_answers(options, t, key, *e)) parts::take_entry(key, std::move(*e), &r);
      }
      if (!r.hit && why.empty()) why = parts::kNotInStore;
    };
    // The scanner key, then its manifest's sets; for a program that may
    // share its entry with every name, first all that for no name.
    auto look_up_request = [&](const cache::CompileRequest& req) {
      Hash128 scanner_key = cache::compute_key(req);
      // A served compile's entry is always under the key of what NVRTC read
      // (settle_entry): its manifest first, never a get of a key nothing is
      // stored under (with a remote, a round trip and its library loaded).
      // An unserved one stored directly under it: not found is no reason
      // yet, its manifest may say more.
      if (!options.served()) {
        lookup(scanner_key);
        if (why == parts::kNotInStore) why.clear();
      }
      if (r.hit) return;
      if (std::optional<cache::Manifest> m = storage_->get_manifest(cache::manifest_key(scanner_key))) {
        for (const cache::ManifestSet& set : m->sets()) {
          std::string set_why;
          std::optional<std::vector<ResolvedHeader>> have = parts::replay(ask_context, set, &set_why);
          if (!have) {
            if (why.empty()) why = set_why;
            continue;
          }
          // Under the worker, a set that read an undeclared file is no hit:
          // a sandboxed build would not find it (the compile says so).
          if (options.serve && options.may_read &&
              !undeclared_files(options.may_read, present_files(set.probes)).empty()) {
            if (why.empty()) why = "a file it read is not among the action's inputs";
            continue;
          }
          lookup(parts::full_key(req, *have, set, prepared.today));
          if (r.hit) {
            for (const cache::ManifestProbe& probe : set.probes) {
              if (!probe.path.empty() && probe.path.front() == '/') {
                prepared.keyed_absolutely.insert(probe.path);
              }
            }
            r.found_by = FoundBy::manifest;
            if (through_asks && !have->empty()) *through_asks = true;
            return;
          }
        }
      }
    };
    if (!storage_) {
      why = "no store";
    } else if (prepared.uses_time) {  // a hit would be another second's __TIME__
      why = "it uses __TIME__ or __TIMESTAMP__ (never cached)";
    } else {
      if (options.name_free) {
        // The request made nameless in place and back: a copy would copy
        // every header's bytes.
        std::string name = std::move(request.source_name);
        const std::string pass = request.image_pass;
        request = parts::any_name_request(std::move(request), options.shared_name);
        look_up_request(request);
        request.source_name = std::move(name);
        request.image_pass = pass;
        r.any_name = r.hit;
      }
      if (!r.hit) look_up_request(request);
    }
    if (!r.hit) r.miss_reason = why;
    out->push_back(std::move(r));
  }
  // Nothing found that no longer held: the last stored compile of this
  // source says what changed since (cache/lookup_note.h).
  if (!storage_ || !storage_->local()) return;
  std::optional<cache::LookupNote> last;
  bool read = false;
  for (TargetResult& r : *out) {
    if (r.hit || !r.miss_reason.empty()) continue;
    if (!read) last = cache::read_lookup_note(storage_->local()->dir(), note_key(options));
    read = true;
    r.miss_reason = parts::since_note(last, lookup_note(options, prepared), options, r.target);
  }
}

// Once per target, where its lookup was decided (ccache's statistics): a hit
// and the NVRTC time it saves, or a miss.
void Compiler::count_lookups(const std::vector<TargetResult>& targets) {
  if (!storage_) return;
  for (const TargetResult& r : targets) {
    storage_->count(r.hit ? "hits" : "misses", 1);
    if (!r.hit) continue;
    storage_->count("compile_ms_saved", r.compile_ms);
    if (r.found_by == FoundBy::lookup_record) storage_->count("lookup_record_hits", 1);
    if (r.found_by == FoundBy::manifest) storage_->count("manifest_hits", 1);
  }
}

std::vector<TargetResult> Compiler::explain(const CompileOptions& options) {
  std::vector<TargetResult> found;
  Prepared prepared = prepare_head(options);
  if (records_apply(options) && record_hit(options, prepared, &found)) return found;
  resolve(options, &prepared);
  bool through_asks = false;
  look_up(options, prepared, &found, &through_asks);
  return found;
}

}  // namespace kcache::compiler
