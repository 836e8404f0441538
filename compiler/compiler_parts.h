// What the Compiler's files share (compiler.h's class is cut by role, one
// file each: compiler.cc the compile's outline and its key, compiler_lookup.cc
// the lookup, compiler_records.cc lookup records, compiler_miss_reason.cc why
// a lookup missed, compiler_misses.cc the compile of the misses,
// compiler_name_check.cc a program's answer for every name,
// compiler_store.cc a miss's entry and storing it). Private to compiler/.
#pragma once

#include <exception>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "cache/format/entry.h"
#include "cache/format/key.h"
#include "cache/format/lookup_note.h"
#include "cache/format/manifest.h"
#include "common/error.h"
#include "common/hash.h"
#include "compiler/compiler.h"
#include "compiler/image/lean_image.h"
#include "compiler/includes.h"
#include "compiler/key_recipe.h"
#include "compiler/nvrtc/nvrtc.h"
#include "compiler/seal/probes.h"
#include "compiler/served_keys.h"

namespace kcache::compiler {

struct Compiler::Prepared {
  KeyRecipe recipe;  // what this compile's namespace keys and how (key_recipe.h)
  // The folder the compile works in (served_keys.h, compile_folder) and how
  // NVRTC spells it (folder_spelling).
  std::string folder;
  std::string spelling;
  std::vector<Target> targets;
  std::vector<std::string> key_options;
  std::string source;
  IncludeGraph includes;
  cache::CompileRequest request;  // target and arch left to fill
  // Time macros (time_macros.h), unless sloppy: `today` is __DATE__'s value
  // when prepared (empty: sloppy), `uses_time` whether the source or a
  // scanned header uses __TIME__ / __TIMESTAMP__ (nothing looked up or stored).
  std::string today;
  bool uses_time = false;
  // Absolute names the manifests that answered keyed (look_up): a lookup
  // record keys them absolutely too, wherever they lie.
  std::set<std::string> keyed_absolutely;
};

// One target compiled now: what NVRTC answered and what keys it.
struct Compiler::Miss {
  size_t index = 0;  // into CompileResult::targets
  Target target;
  NvrtcInput input;
  std::optional<NvrtcOutput> output;
  cache::ManifestSet paths;        // what its manifest set records: the keyed probes
  ClassifiedProbes classified;     // what NVRTC named, classified
  bool date_keyed = false;         // the key holds today's __DATE__
  bool name_checked = false;       // one answer for every name (name_check)
  NotTheFolders not_the_folders;   // names beneath the program's folder not (only) its
  LeanImage lean;
  std::exception_ptr error;
  // A cubin compile that also answers a PTX target of its virtual arch
  // (compile_misses, ptx_from_cubins): NVRTC's PTX, kept before the lean pass.
  bool keeps_ptx = false;
  std::string kept_ptx;
  // Storing it (store_misses).
  bool storable = true;
  bool time_macros = false;  // not stored for them
  std::optional<Hash128> manifest_key;
  std::optional<cache::Entry> shared;  // the entry for every name, if not r.entry
};

namespace parts {

// A miss's reasons (TargetResult::miss_reason) that name no path: a set held
// but its entry is gone (evicted, cleared), or nothing was found at all.
constexpr char kNotInStore[] = "not in store";

// The folder of `path` ("" for a bare name, "/" for "/x").
std::string folder_of(const std::string& path);
// `path` beneath this process's working folder where it is relative.
std::string absolute_path(const std::string& path);

// ccache's rule for the time macros (time_macros.h), over scanned headers.
bool any_uses_time_macros(const std::vector<ResolvedHeader>& headers);
bool any_uses_date_macro(const std::vector<ResolvedHeader>& headers);

// How the scanner reads a file compiled with these options: NVRTC 13
// replaces trigraphs with -std=c++03, c++11 and c++14 only (measured).
ScanOptions scan_options(const CompileOptions& options);

// The full key of a result: its scanner key's request with everything
// NVRTC named (the manifest set's probes) keyed.
Hash128 full_key(cache::CompileRequest request, const cache::ManifestSet& set);

// Whether `e`, found under `key`, answers target `t` (compiler_lookup.cc).
bool entry_answers(const CompileOptions& options, const Target& t, const Hash128& key,
                   const cache::Entry& e);
// `r` a hit on `e`.
void take_entry(const Hash128& key, cache::Entry e, TargetResult* r);

// A program's folders and its request for every name (compiler_name_check.cc).
std::string program_folder(const CompileOptions& options);
std::string program_folder_of(const std::string& name);
cache::CompileRequest any_name_request(cache::CompileRequest request,
                                       const std::string& shared_name);

// A miss's reason where nothing stored matched (compiler_miss_reason.cc).
std::string since_note(const std::optional<cache::LookupNote>& last, const cache::LookupNote& now,
                       const CompileOptions& options, const Target& t);

}  // namespace parts
}  // namespace kcache::compiler
