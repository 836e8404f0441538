// The precompiler: compiles one kernel source for several targets (a cubin per
// real arch, PTX for a virtual arch) through the cache, and makes its bundle.
//
// Every compile is served (seal/seal.h): NVRTC reads the real file system
// itself, from the working folder and -I folders it is given, and the seal
// copies every file it opens into a hashed snapshot. A target is stored under
// its full key, over everything NVRTC read (every file by the bytes it was
// served, every name it found absent; seal/probes.h), and that set of paths
// is added to the manifest of its scanner key (cache/format/manifest.h): the
// key a lookup computes before NVRTC runs (compiler identity, target,
// canonical options, source, name expressions, and for a program its
// in-memory headers). A lookup replays the manifest's sets against the disk:
// a set whose every path still holds leads to its full key, computed from
// what is read now (docs/KEYS.md says why that is exact; counter
// `manifest_hits`). The store is asked first, for every target; NVRTC is
// loaded and run only for the misses. A hit never loads NVRTC. A result NVRTC
// could not be sealed for is not stored. Nor is one whose input uses
// __TIME__ / __TIMESTAMP__, which is never looked up either; __DATE__ is
// keyed by its value (time_macros.h; off with the time_macros sloppiness).
//
// Misses compile concurrently, one thread each, at most `max_parallel` at a
// time. NVRTC serializes compiles within one process (nvrtc_worker.h), so one
// compile runs in this process and the others, given a worker command, in
// worker processes; without one they wait their turn.
//
// Failure: a source NVRTC rejects throws CompileError carrying NVRTC's log as
// written and the options, and nothing is stored (not even the targets that
// compiled). A bad flag or arch is InvalidArgument, an unreadable file IoError
// or NotFound. Cache trouble never fails a compile (cache::Storage's contract).
#pragma once

#include <condition_variable>
#include <functional>
#include <future>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "cache/format/entry.h"
#include "cache/format/key.h"
#include "cache/format/lookup_note.h"
#include "cache/format/manifest.h"
#include "cache/format/program_record.h"
#include "cache/storage.h"
#include "common/hash.h"
#include "compiler/includes.h"
#include "compiler/seal/probes.h"
#include "compiler/toolkit.h"

namespace kcache {
class CompileError;
}

namespace kcache::compiler {

class DiskObservations;
struct KeyRecipe;
class NvrtcPool;
struct NvrtcInput;
struct NvrtcOutput;

struct Target {
  cache::TargetKind kind = cache::TargetKind::cubin;
  std::string arch;  // "sm_90", "sm_90a", "compute_90"
  int number = 0;    // 90
};

// "sm_80", "sm_90a", "sm_100f" as a cubin target; "compute_90" as PTX.
// Throws InvalidArgument saying what a valid name looks like.
Target parse_target(const std::string& arch, cache::TargetKind kind);

struct CompileOptions {
  std::string source_path;  // where the source is read, as given
  // The source itself, for callers that hold it in memory (the runtime JIT):
  // then source_path is not read, only the folder of quoted includes (and may
  // be empty: the working directory), and source_name must name the source.
  std::optional<std::string> source_text;
  // The logical name NVRTC reports and the key hashes; empty: source_path.
  // NVRTC's program is named so and searches its quoted includes next to
  // that name, as NVRTC alone given the name would.
  std::string source_name;
  // The Bazel target compiling it ("//pkg:k"), for messages only (never
  // keyed): the hint to declare a header names it.
  std::string target_label;
  std::vector<std::string> archs;             // real archs, one cubin each: "sm_80"
  std::string ptx_arch;                       // virtual arch for PTX ("compute_90"), or empty
  std::vector<std::string> include_dirs;      // -I, given to NVRTC as written
  std::vector<std::string> defines;           // NAME or NAME=VALUE
  // -D and -U in the order given, each "-DNAME[=VALUE]" or "-UNAME": NVRTC
  // applies them in order (`-UX -DX=1` defines X, `-DX=1 -UX` does not), so
  // they are keyed and passed in this order, after `defines` (issue 26).
  std::vector<std::string> macros;
  std::string std;                            // "c++17"; empty: NVRTC's default
  std::vector<std::string> nvrtc_options;     // passed through, e.g. "-lineinfo"
  std::vector<std::string> name_expressions;  // "scale<float>"
  // Lean images (lean_image.h): NVRTC's image less the internal variables
  // nothing references; false: NVRTC's bytes exactly. Part of the key.
  bool lean = true;
  // The user files kcache may read while resolving includes (includes.h);
  // empty: all. Bazel's worker limits a request to its declared inputs.
  MayRead may_read;
  // Headers the caller holds in memory (an NVRTC program's): handed to NVRTC
  // under their names and keyed by name and bytes; the scanner never looks
  // for these names on disk.
  std::vector<cache::Header> memory_headers;
  // An NVRTC program's compile (program.h): one target (with `lean`, its
  // CUBIN made lean and its PTX left as NVRTC wrote it), every answer NVRTC gives stored as a
  // cache::ProgramRecord in the entry's payload, a source NVRTC rejects
  // stored as a result rather than thrown, no stub for a missing include
  // (NVRTC's own message must reach the log), and no bundle.
  bool program = false;
  // The folder the compile works in: NVRTC's working folder, where relative
  // names (the source's name, -I, quoted includes) are taken from and what a
  // served compile keys paths relative to. Empty: this process's, spelled in
  // outputs as $PWD spells it. A given folder is taken by its real name
  // (absolute; lexically normalised where it does not exist) and spelled so,
  // unless $PWD names that very folder (NVRTC reads $PWD wherever it runs).
  // `source_path` is still read from this process's folder.
  std::string working_folder;
  // A program whose answer may not depend on its folder (program.h decides):
  // looked up first under the key of its file name in any folder
  // (any_name_request, `shared_name`), then under its own; on a miss, given
  // the stored payload, returns the payload to store for every folder, or
  // nothing if the answer names the program (then it is stored under its own
  // key). Null: the name is always keyed.
  std::function<std::optional<std::string>(const std::string& payload)> name_free;
  // With name_free: a miss also compiles under `name_check` (another name,
  // of another length), and is stored for every name only where
  // `name_check_same` says the two answers are one (program.h).
  std::string name_check;
  // What the key of every name holds in place of the name (its file name).
  std::string shared_name;
  std::function<bool(const cache::ProgramRecord& answer, const cache::ProgramRecord& other)>
      name_check_same;

  const std::string& logical_name() const {
    return source_name.empty() ? source_path : source_name;
  }
};

// How a hit was found: its key as computed, a manifest's set replayed against
// the disk (cache/format/manifest.h), or a lookup record (lookup_record.h).
enum class FoundBy { key, manifest, lookup_record };

struct TargetResult {
  Target target;
  Hash128 key;
  bool hit = false;
  FoundBy found_by = FoundBy::key;  // a hit's
  // A miss's reason in one line, as the lookup decided it: the first thing it
  // found that no longer held ("inc/v.h changed", "inc/w.h appeared" from the
  // newest manifest set; "not in store" where a set held but its entry is
  // gone), else that nothing was stored for this source text, these options
  // and this toolkit. Empty for a hit.
  std::string miss_reason;
  // What NVRTC took: now on a miss, when it was stored on a hit (time saved).
  uint32_t compile_ms = 0;
  std::optional<cache::Entry> entry;  // the image and its lowered names
  // What the lean pass did (lean_image.h): now on a miss, as the entry
  // recorded it on a hit (all false/0 for an entry older than the record:
  // entry->lean().unknown()).
  bool lean = false;
  int64_t lean_bytes_removed = 0;
  uint32_t lean_variables_removed = 0;
  std::string lean_note;  // on a miss: why the image is NVRTC's, when there was a reason
  // On a miss that was not stored: why (no seal, time macros, an include
  // found nowhere, ...); empty for a hit or a stored miss.
  std::string not_stored;
  // The entry is one for every program name (CompileOptions::name_free):
  // its payload as stored says so (program.h restores the name).
  bool any_name = false;
  // A miss that name_check answered otherwise: kept under its own name.
  bool name_dependent = false;
};

struct CompileResult {
  std::string source_name;
  std::string compiler_identity;
  std::vector<TargetResult> targets;  // cubins in --arch order, then PTX
  std::vector<cache::LoweredName> lowered_names;
  std::string warnings;  // NVRTC's log of the targets compiled now, if not empty
  std::string bundle;    // the serialized .kcb
  // Wall time from compile()'s start until every target's lookup was
  // decided: all a hit costs, before the bundle is made.
  double lookup_ms = 0;

  int hits() const;
  int misses() const;
};

// Options as NVRTC receives them (minus -arch and the toolkit's -I), which are
// the options the key hashes: no path of this machine is among them. -std
// first, then `defines`, then `macros` in their order, then nvrtc_options as
// given: an option's place changes its key only where it can change NVRTC's
// result (the order of -D and -U).
std::vector<std::string> canonical_options(const CompileOptions& options);

class Compiler {
 public:
  // `storage` may be null (no caching). `max_parallel` caps NVRTC compiles
  // running at once across all compile() calls (0: one per CPU).
  // `worker_command` runs run_nvrtc_worker() in a new process, e.g.
  // {"/usr/bin/kcache", "__nvrtc-worker"}; empty: everything in-process.
  Compiler(Toolkit toolkit, cache::Storage* storage, int max_parallel = 0,
           std::vector<std::string> worker_command = {});

  // For a long-lived process: compiles in this process use NVRTC's automatic
  // precompiled headers, kept under `pch_dir` (see pch.h). Outputs and keys
  // are unchanged. Call before compile().
  // NVRTC writes its PCH work files to $TMPDIR, and the seal lets it write
  // only beneath `pch_dir`: this points TMPDIR there (process-wide, so call
  // it before any thread that reads the environment starts).
  void use_pch(std::string pch_dir);
  // For a long-lived process: every compile runs in `pool`'s long-lived
  // children (nvrtc_pool.h), none in this process or a new process each.
  // The pool must outlive the Compiler. Call before compile().
  void use_pool(NvrtcPool* pool) { pool_ = pool; }

  // Thread-safe: prewarm calls it from many threads.
  CompileResult compile(const CompileOptions& options);

  // What compile() would find now, per target (cubins in --arch order, then
  // PTX): its key, whether it hits and a miss's reason, without compiling,
  // counting, or writing a lookup record or note (what it finds is used, as
  // a lookup uses it: LRU order, a remote hit copied to the local store).
  // Throws what compile() throws before NVRTC.
  std::vector<TargetResult> explain(const CompileOptions& options);

  // The key of each target (cubins in --arch order, then PTX), as compile()
  // looks them up first, without asking the store or loading NVRTC: the
  // scanner keys. A result is stored under its full key, found through the
  // manifest of this one.
  std::vector<Hash128> keys(const CompileOptions& options) const;

  const Toolkit& toolkit() const { return toolkit_; }

  // A host's fork() (pthread_atfork, nvrtc_shim/shim.cc): the compile
  // slots held across it; the child's are all free.
  void lock_for_fork() { slots_.lock_for_fork(); }
  void unlock_after_fork(bool child) { slots_.unlock_after_fork(child); }

 private:
  class Slots {  // a counting semaphore (C++17 has none)
   public:
    explicit Slots(int n) : total_(n), free_(n) {}
    void acquire();
    void release();
    void lock_for_fork() { mutex_.lock(); }
    // In a fork's child the slots the parent's compiling threads held are
    // free: those threads are not there to give them back.
    void unlock_after_fork(bool child) {
      if (child) free_ = total_;
      mutex_.unlock();
    }

   private:
    std::mutex mutex_;
    std::condition_variable cv_;
    const int total_;
    int free_;
  };

  struct Prepared;
  Prepared prepare(const CompileOptions& options) const;  // prepare_head, then resolve
  // The targets, the options and the source: what a lookup starts from.
  Prepared prepare_head(const CompileOptions& options) const;
  // The includes resolved and the request made (the scanner key's).
  void resolve(const CompileOptions& options, Prepared* p) const;
  // Where an option writes file names into the output: the working folder's
  // $PWD spelling (where not getcwd's) and the toolkit's folders, keyed.
  void key_folders_named_in_outputs(const Prepared& p, cache::CompileRequest* request) const;
  // The scanner's view of `source`'s includes (includes.h).
  IncludeGraph scan(const CompileOptions& options, const KeyRecipe& recipe,
                   const std::string& source) const;
  // The includes the scanner found nowhere, for a failed compile's hints
  // (a served compile scans only now).
  std::vector<MissingInclude> missing_includes(const CompileOptions& options,
                                               const Prepared& p) const;
  // Looks every target up, one TargetResult each (hit, or a miss and its
  // reason) appended to `out`. Counts nothing: count_lookups does, once.
  void look_up(const CompileOptions& options, Prepared& p, std::vector<TargetResult>* out);
  void count_lookups(const std::vector<TargetResult>& targets);
  // Lookup notes (cache/format/lookup_note.h): a miss's reason where nothing
  // stored matched. The key of a source's note, the note of this lookup,
  // and writing it after a stored miss (best effort).
  Hash128 note_key(const CompileOptions& options) const;
  cache::LookupNote lookup_note(const CompileOptions& options, const Prepared& p) const;
  void write_note(const CompileOptions& options, const Prepared& p);
  // Each miss that found nothing that no longer held gets its reason from
  // the source's note: what changed since its last stored compile.
  void add_reasons_since_note(const CompileOptions& options, const Prepared& p,
                              std::vector<TargetResult>* targets) const;
  // Lookup records (lookup_record.h): whether a compile has them (a store,
  // no may_read, not KCACHE_LOOKUP_RECORDS=off); what its record key hashes
  // but the program's name; and the key, for its name or (`any_name`, a
  // name_free program) its file name in any folder.
  bool records_apply(const CompileOptions& options) const;
  std::string record_inputs(const CompileOptions& options, const Prepared& p) const;
  static Hash128 record_key(const std::string& inputs, const CompileOptions& options,
                            bool any_name);
  bool record_hit(const CompileOptions& options, const Prepared& p,
                  std::vector<TargetResult>* out);
  void write_lookup_record(const CompileOptions& options, const Prepared& p,
                           const DiskObservations& seen, const std::vector<TargetResult>& found);
  // After a miss was stored: looked up as the next process would, recorded.
  void record_after_store(const CompileOptions& options, const Prepared& made);
  // The lowered names and the bundle of a result whose targets all have entries.
  CompileResult finish(const CompileOptions& options, CompileResult result) const;

  // The misses of one compile (compiler_misses.cc): each target NVRTC
  // compiles now, on a thread of its own; then keyed and stored.
  struct Miss;
  void compile_misses(const CompileOptions& options, Prepared& p, bool recorded,
                      CompileResult* result);
  void check_archs(const std::vector<Miss>& misses) const;
  std::vector<size_t> run_compiles(const CompileOptions& options, const Prepared& prepared,
                                   std::vector<Miss>* all);
  void count_compiles(const std::vector<Miss>& misses, const std::vector<size_t>& compiled);
  void throw_first_error(const CompileOptions& options, const Prepared& prepared,
                         const std::vector<Miss>& misses) const;
  static std::vector<std::pair<size_t, size_t>> ptx_from_cubins(const Prepared& p,
                                                                std::vector<Miss>* misses);
  bool take_ptx(const CompileOptions& options, const Prepared& p, const Miss& cubin,
                Miss* ptx) const;
  NvrtcInput miss_input(const CompileOptions& options, const Prepared& p, const Target& t) const;
  void compile_miss(const CompileOptions& options, const Prepared& p, Miss* m);
  NvrtcOutput run_nvrtc(const NvrtcInput& input, std::unique_lock<std::mutex>* here);
  // What NVRTC named (seal.h), classified and keyed into m->classified.
  void settle_probes(const MountTableWatch& mounts, Miss* m);
  // `early`: the check's compile, already started (compile_miss), or null.
  void check_name(const CompileOptions& options, Miss* m, std::unique_lock<std::mutex>* here,
                  std::future<NvrtcOutput>* early);
  void make_lean(const Prepared& p, Miss* m) const;
  void store_misses(const CompileOptions& options, const Prepared& p, std::vector<Miss>& misses,
                    CompileResult* result);
  void settle_entry(const CompileOptions& options, const Prepared& p, int64_t now, Miss* m,
                    TargetResult* r);
  void add_to_manifest(const Hash128& key, cache::ManifestSet set);

  Toolkit toolkit_;
  std::string identity_;
  std::string keyed_identity_;  // identity_ and the toolkit's folders NVRTC is given
  cache::Storage* storage_;
  Slots slots_;
  std::vector<std::string> worker_command_;
  std::mutex in_process_;  // held while this process runs an NVRTC compile
  std::string pch_dir_;    // empty: no PCH
  NvrtcPool* pool_ = nullptr;
  ProbeContext probe_context_;  // what the sealed NVRTC's probes mean (probes.h)
};

}  // namespace kcache::compiler
