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

namespace parts {

// Whether `e`, found under `key`, answers target `t`: a key collision or a
// foreign writer must never hand out a wrong image.
bool entry_answers(const CompileOptions& options, const Target& t, const Hash128& key,
                   const cache::Entry& e) {
  bool names_ok = e.lowered_names().size() == options.name_expressions.size();
  if (options.program) {
    try {  // a compile NVRTC rejected has no lowered names
      names_ok = names_ok ||
                 cache::ProgramRecord::decode(e.payload()).compile_result != cache::kNvrtcSuccess;
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

namespace {

// One target's lookup: the manifest of a request's key, its sets newest
// first, each checked against the disk (cache/format/manifest.h), then the
// entry under the full key of the first set that holds. A result is always
// stored under the key of what NVRTC read (settle_entry), so the request's
// own key is never asked (with a remote, a round trip and its library
// loaded). `why` keeps the first thing found that no longer held (the newest
// set's changed path, an entry no longer stored): a miss's reason.
class TargetLookup {
 public:
  TargetLookup(cache::Storage& storage, const CompileOptions& options, const KeyRecipe& recipe,
               const ProbeContext& probes, TargetResult* r)
      : storage_(storage), options_(options), recipe_(recipe), probes_(probes), r_(*r) {}

  std::string why;
  std::set<std::string> keyed_absolutely;  // the absolute names the answering set keyed

  void look_up(const cache::CompileRequest& request) {
    const Hash128 first_key = cache::compute_key(request);
    std::optional<cache::Manifest> m = storage_.get_manifest(cache::manifest_key(first_key));
    if (!m) return;
    for (const cache::ManifestSet& set : m->sets()) {
      if (through_set(request, set)) return;
    }
  }

 private:
  void get(const Hash128& key) {
    // Counted by the caller, once the lookup is decided (count_lookups).
    if (std::optional<cache::Entry> e = storage_.get(key, cache::Store::Access::uncounted)) {
      if (parts::entry_answers(options_, r_.target, key, *e)) {
        parts::take_entry(key, std::move(*e), &r_);
      }
    }
    if (!r_.hit && why.empty()) why = parts::kNotInStore;
  }

  // Whether `set` holds on the disk now; else `why` says what changed.
  bool holds(const cache::ManifestSet& set) {
    std::string set_why;
    if (!set.empty()) {
      set_why = "its manifest set asks for headers";  // no compile makes such sets now
    } else if (probes_hold(set.probes, probes_, &set_why) && !reads_undeclared(set)) {
      return true;
    }
    if (why.empty()) why = set_why.empty() ? "a file it read is not among the action's inputs" : set_why;
    return false;
  }

  // Under the worker, a set that read an undeclared file is no hit: a
  // sandboxed build would not find it (the compile says so).
  bool reads_undeclared(const cache::ManifestSet& set) const {
    return options_.may_read && recipe_.keys_relative_to_working_folder &&
           !undeclared_files(options_.may_read, present_files(set.probes, probes_.working_folder))
                .empty();
  }

  bool through_set(const cache::CompileRequest& request, const cache::ManifestSet& set) {
    if (!holds(set)) return false;
    get(parts::full_key(request, set));
    if (!r_.hit) return false;
    for (const cache::ManifestProbe& probe : set.probes) {
      if (!probe.path.empty() && probe.path.front() == '/') keyed_absolutely.insert(probe.path);
    }
    r_.found_by = FoundBy::manifest;
    return true;
  }

  cache::Storage& storage_;
  const CompileOptions& options_;
  const KeyRecipe& recipe_;
  const ProbeContext& probes_;
  TargetResult& r_;
};

}  // namespace

void Compiler::look_up(const CompileOptions& options, Prepared& prepared,
                       std::vector<TargetResult>* out) {
  cache::CompileRequest& request = prepared.request;
  // A program's probes in its own folder are recorded relative to it for
  // the entry of every name (settle_entry): checked in this one's.
  ProbeContext probes = probe_context_;
  probes.working_folder = prepared.folder;
  probes.program_folder = prepared.recipe.probe_folder == KeyRecipe::Folder::program
                              ? parts::program_folder(options)
                              : prepared.folder;
  for (const Target& t : prepared.targets) {
    TargetResult r;
    r.target = t;
    request.target = t.kind;
    request.arch = t.arch;
    r.key = cache::compute_key(request);
    std::optional<TargetLookup> lookup;
    if (storage_) lookup.emplace(*storage_, options, prepared.recipe, probes, &r);
    if (!storage_) {
      r.miss_reason = "no store";
    } else if (prepared.uses_time) {  // a hit would be another second's __TIME__
      r.miss_reason = "it uses __TIME__ or __TIMESTAMP__ (never cached)";
    } else {
      if (options.name_free) {
        // A program that may share its entry with every name: first for no
        // name. The request made nameless in place and back: a copy would
        // copy every header's bytes.
        std::string name = std::move(request.source_name);
        const std::string pass = request.image_pass;
        request = parts::any_name_request(std::move(request), options.shared_name);
        lookup->look_up(request);
        request.source_name = std::move(name);
        request.image_pass = pass;
        r.any_name = r.hit;
      }
      if (!r.hit) lookup->look_up(request);
      if (!r.hit) r.miss_reason = lookup->why;
      prepared.keyed_absolutely.insert(lookup->keyed_absolutely.begin(),
                                       lookup->keyed_absolutely.end());
    }
    out->push_back(std::move(r));
  }
  // Nothing found that no longer held: the last stored compile of this
  // source says what changed since (cache/format/lookup_note.h).
  add_reasons_since_note(options, prepared, out);
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
  look_up(options, prepared, &found);
  return found;
}

}  // namespace kcache::compiler
