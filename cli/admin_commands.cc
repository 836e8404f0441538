// ccache-style administration of the local store: -s, -z, -C, -c, -M,
// --evict-older-than, and the verbs verify, ls, show, export, import. A thin
// layer over cache::Store: every number printed comes from the store's API.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <ctime>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>

#include "cache/format/archive.h"
#include "cache/config.h"
#include "cache/format/program_record.h"
#include "cache/local/store.h"
#include "cli/command.h"
#include "cli/storage_flags.h"
#include "cli/units.h"
#include "common/error.h"
#include "common/file_system.h"
#include "common/lean_record.h"
#include "compiler/image/cubin_kernels.h"
#include "compiler/image/ptx_entries.h"

namespace kcache::cli {
namespace {

using cache::Store;
using nlohmann::json;

// The store folder as every verb resolves it: --dir, $KCACHE_DIR, `dir` in
// $KCACHE_CONFIG, then the default.
std::unique_ptr<Store> open_store(const GlobalOptions& global) {
  return Store::open(storage_config(global).options.local_dir);
}

json remote_json(const cache::StorageConfig& config) {
  if (!config.options.remote) return nullptr;
  const cache::RemoteOptions& r = *config.options.remote;
  return json{{"url", r.url},
              {"layout", cache::to_string(r.layout)},
              {"read_only", r.read_only},
              {"signed", !r.hmac_key_file.empty()}};
}

bool json_output(const GlobalOptions& global) { return global.format == "json"; }

std::string iso_time(int64_t unix_s) {
  if (unix_s <= 0) return "-";
  std::time_t t = static_cast<std::time_t>(unix_s);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", std::localtime(&t));
  return buf;
}

Hash128 parse_key(const std::string& text) {
  std::optional<Hash128> key = Hash128::from_hex(text);
  if (!key) {
    throw InvalidArgument("\"" + text +
                          "\" is not a key: a key is 32 hex digits, as `kcache ls` "
                          "prints them");
  }
  return *key;
}

// Known counters, in display order, with how to label them. Counters other
// parts of kcache add (remote tier, ...) and that are not listed here are
// shown under their own names.
struct CounterLabel {
  const char* name;
  const char* label;
  bool is_ms;
};
constexpr CounterLabel kCounterLabels[] = {
    {"hits", "Hits", false},
    {"misses", "Misses", false},
    {"stored", "Stored", false},
    // NVRTC's times of compiles summed: compiles that ran in parallel (a
    // build's actions) overlap, so the wall time saved is less (`kcache run`
    // gives it where it can be known).
    {"compile_ms_saved", "NVRTC time saved, summed", true},
    {"manifest_hits", "Hits through manifests", false},
    {"lookup_record_hits", "Hits through lookup records", false},
    {"nvrtc_invocations", "NVRTC invocations", false},
    {"nvrtc_ms", "NVRTC time spent, summed", true},
    {"nvrtc_failures", "NVRTC compile errors", false},
    {"uncached_compiles", "Compiled, not cached", false},
    {"uncached_time_macros", "Uncached: time macros", false},
    {"remote_hits", "Remote hits", false},
    {"remote_misses", "Remote misses", false},
    {"remote_errors", "Remote errors", false},
    {"remote_rejected", "Remote entries rejected", false},
    {"remote_stored", "Remote uploads", false},
    {"corrupt_removed", "Corrupt entries removed", false},
    {"evicted", "Evicted", false},
};

json entry_json(const cache::EntryInfo& info) {
  return json{{"key", info.key.hex()},
              {"kind", cache::to_string(info.kind)},
              {"arch", info.arch},
              {"size", info.size},
              {"compile_ms", info.compile_ms},
              {"created", info.created_unix_s},
              {"last_used", info.last_used_unix_s}};
}

int show_stats(const GlobalOptions& global) {
  const cache::StorageConfig config = storage_config(global);
  auto store = Store::open(config.options.local_dir);
  cache::StoreStats stats = store->stats();
  if (json_output(global)) {
    json out{{"dir", store->dir()},
             {"entries", stats.entries},
             {"bytes", stats.bytes},
             {"max_size", stats.max_size},
             {"read_only", store->read_only()},
             {"remote", remote_json(config)},
             {"counters", stats.counters}};
    std::cout << out.dump(2) << "\n";
    return kExitOk;
  }
  std::printf("Local store: %s%s\n", store->dir().c_str(),
              store->read_only() ? " (read-only)" : "");
  if (config.options.remote) {
    const cache::RemoteOptions& r = *config.options.remote;
    std::printf("Remote:      %s (%s layout%s%s)\n", r.url.c_str(), cache::to_string(r.layout),
                r.read_only ? ", read-only" : "", r.hmac_key_file.empty() ? "" : ", signed");
  }
  const int64_t hits = stats.counter("hits"), misses = stats.counter("misses");
  std::set<std::string> shown;
  for (const CounterLabel& c : kCounterLabels) {
    shown.insert(c.name);
    auto it = stats.counters.find(c.name);
    if (it == stats.counters.end() && std::string(c.name).rfind("remote_", 0) == 0 &&
        !config.options.remote) {
      continue;
    }
    int64_t value = it == stats.counters.end() ? 0 : it->second;
    if (std::string(c.name) == "hits" && hits + misses > 0) {
      std::printf("  %-26s %lld / %lld (%.1f %%)\n", "Hits:", static_cast<long long>(hits),
                  static_cast<long long>(hits + misses),
                  100.0 * static_cast<double>(hits) / static_cast<double>(hits + misses));
    } else if (c.is_ms) {
      std::printf("  %-26s %s\n", (std::string(c.label) + ":").c_str(),
                  format_duration_ms(value).c_str());
    } else {
      std::printf("  %-26s %lld\n", (std::string(c.label) + ":").c_str(),
                  static_cast<long long>(value));
    }
  }
  for (const auto& [name, value] : stats.counters) {
    if (!shown.count(name))
      std::printf("  %-26s %lld\n", (name + ":").c_str(), static_cast<long long>(value));
  }
  std::printf("  %-26s %llu\n", "Entries:", static_cast<unsigned long long>(stats.entries));
  if (stats.max_size > 0) {
    std::printf("  %-26s %s / %s (%.1f %%)\n", "Size:", format_size(stats.bytes).c_str(),
                format_size(stats.max_size).c_str(),
                100.0 * static_cast<double>(stats.bytes) / static_cast<double>(stats.max_size));
  } else {
    std::printf("  %-26s %s (no limit)\n", "Size:", format_size(stats.bytes).c_str());
  }
  return kExitOk;
}

// What an entry holds, for `kcache ls`: its source's name (empty for an
// entry older than format 4) and its kernels, read from its image (an NVRTC
// program's record: its PTX, else its CUBIN).
struct Listed {
  std::string source;
  std::vector<std::string> kernels;
};

std::vector<std::string> image_kernels(cache::TargetKind kind, std::string_view image) {
  std::vector<std::string> names;
  if (kind == cache::TargetKind::cubin) return compiler::cubin_kernels(image);
  compiler::PtxEntries entries = compiler::ptx_entries(image);
  for (const compiler::PtxEntry& e : entries.entries) names.push_back(e.name);
  return names;
}

Listed what_entry_holds(Store& store, const cache::EntryInfo& info) {
  Listed out;
  std::optional<cache::Entry> entry;
  try {
    entry = store.get(info.key, Store::Access::maintenance);
  } catch (const Error&) {
    return out;  // unreadable now: listed by its index row alone
  }
  if (!entry) return out;
  out.source = entry->source_name();
  std::string_view payload = entry->payload();
  if (payload.substr(0, cache::kProgramRecordMagic.size()) != cache::kProgramRecordMagic) {
    out.kernels = image_kernels(info.kind, payload);
    return out;
  }
  try {
    cache::ProgramRecord record = cache::ProgramRecord::decode(payload);
    std::string ptx = record.output(cache::ProgramOutput::ptx).bytes;
    while (!ptx.empty() && ptx.back() == '\0') ptx.pop_back();
    out.kernels = ptx.empty() ? image_kernels(cache::TargetKind::cubin,
                                              record.output(cache::ProgramOutput::cubin).bytes)
                              : image_kernels(cache::TargetKind::ptx, ptx);
  } catch (const Error&) {
    // A record this kcache cannot read: no kernels to name.
  }
  return out;
}

// "saxpy", "a, b", "a, b +3 more": a text row stays one screen wide.
std::string kernels_shown(const std::vector<std::string>& kernels) {
  if (kernels.empty()) return "-";
  std::string out;
  size_t shown = 0;
  for (; shown < kernels.size() && shown < 2; ++shown) {
    out += (out.empty() ? "" : ", ") + kernels[shown];
  }
  if (out.size() > 60) out = out.substr(0, 57) + "...";
  if (shown < kernels.size()) out += " +" + std::to_string(kernels.size() - shown) + " more";
  return out;
}

int list_entries(const GlobalOptions& global) {
  auto store = open_store(global);
  std::vector<cache::EntryInfo> entries = store->list();
  if (json_output(global)) {
    json out = json::array();
    for (const auto& e : entries) {
      Listed l = what_entry_holds(*store, e);
      json j = entry_json(e);
      j["source"] = l.source;
      j["kernels"] = l.kernels;
      out.push_back(std::move(j));
    }
    std::cout << out.dump(2) << "\n";
    return kExitOk;
  }
  std::printf("%-19s  %-11s  %-5s  %10s  %10s  %-32s  %-24s  %s\n", "LAST USED", "ARCH", "KIND",
              "SIZE", "COMPILE", "KEY", "SOURCE", "KERNELS");
  for (const auto& e : entries) {
    Listed l = what_entry_holds(*store, e);
    std::printf("%-19s  %-11s  %-5s  %10s  %10s  %-32s  %-24s  %s\n",
                iso_time(e.last_used_unix_s).c_str(), e.arch.c_str(), cache::to_string(e.kind),
                format_size(e.size).c_str(), format_duration_ms(e.compile_ms).c_str(),
                e.key.hex().c_str(), l.source.empty() ? "-" : l.source.c_str(),
                kernels_shown(l.kernels).c_str());
  }
  return kExitOk;
}

int show_entry(const GlobalOptions& global, const std::string& key_text,
               const std::string& payload_out) {
  Hash128 key = parse_key(key_text);
  auto store = open_store(global);
  std::optional<cache::EntryInfo> info = store->info(key);
  if (!info) throw NotFound("no entry " + key.hex() + " in " + store->dir());
  // Read (not counted as a use) for what only the entry holds: the lean record.
  std::optional<cache::Entry> entry = store->get(key, Store::Access::maintenance);
  if (!payload_out.empty()) {
    if (!entry) throw CorruptError("entry " + key.hex() + " is corrupt and was removed");
    write_file_atomically(payload_out, entry->payload());
  }
  if (json_output(global)) {
    json out = entry_json(*info);
    if (entry) {
      out["lean"] = {{"state", state_name(entry->lean())},
                     {"bytes_removed", entry->lean().bytes_removed},
                     {"variables_removed", entry->lean().variables_removed}};
    }
    std::cout << out.dump(2) << "\n";
    return kExitOk;
  }
  std::printf(
      "Key:         %s\nKind:        %s\nArch:        %s\nSize:        %s\n"
      "Compile time: %s\nCreated:     %s\nLast used:   %s\n",
      info->key.hex().c_str(), cache::to_string(info->kind), info->arch.c_str(),
      format_size(info->size).c_str(), format_duration_ms(info->compile_ms).c_str(),
      iso_time(info->created_unix_s).c_str(), iso_time(info->last_used_unix_s).c_str());
  if (entry) std::printf("Lean:        %s\n", describe(entry->lean()).c_str());
  if (!payload_out.empty()) std::printf("Payload written to %s\n", payload_out.c_str());
  return kExitOk;
}

int verify_store(const GlobalOptions& global) {
  auto store = open_store(global);
  cache::VerifyResult r = store->verify();
  if (json_output(global)) {
    std::cout << json{{"checked", r.entries_checked},
                      {"manifests_checked", r.manifests_checked},
                      {"problems", r.problems}}
                     .dump(2)
              << "\n";
  } else {
    for (const std::string& p : r.problems) std::printf("%s\n", p.c_str());
    std::printf("Checked %llu entries and %llu manifests: %s\n",
                static_cast<unsigned long long>(r.entries_checked),
                static_cast<unsigned long long>(r.manifests_checked),
                r.problems.empty()
                    ? "all intact"
                    : (std::to_string(r.problems.size()) + " problems found and repaired").c_str());
  }
  return r.problems.empty() ? kExitOk : kExitFailed;
}

int export_to(const GlobalOptions& global, const std::string& path) {
  auto store = open_store(global);
  cache::ExportResult r = cache::export_archive(*store, path);
  std::printf("Exported %llu entries to %s (%s)\n", static_cast<unsigned long long>(r.entries),
              path.c_str(), format_size(r.bytes).c_str());
  return kExitOk;
}

int import_from(const GlobalOptions& global, const std::string& path) {
  auto store = open_store(global);
  cache::ImportResult r = cache::import_archive(*store, path);
  for (const std::string& p : r.problems) std::fprintf(stderr, "kcache import: %s\n", p.c_str());
  std::printf("Imported %llu entries from %s (%llu already present, %llu rejected)\n",
              static_cast<unsigned long long>(r.imported), path.c_str(),
              static_cast<unsigned long long>(r.already_present),
              static_cast<unsigned long long>(r.rejected));
  return r.complete && r.rejected == 0 ? kExitOk : kExitFailed;
}

// The ccache-style flags, run in a fixed order when several are given
// (`kcache -z -s` zeroes, then shows).
struct AdminFlags {
  bool show_stats = false;
  bool zero_stats = false;
  bool clear = false;
  bool cleanup = false;
  std::string max_size;
  std::string evict_older_than;
  bool any() const {
    return show_stats || zero_stats || clear || cleanup || !max_size.empty() ||
           !evict_older_than.empty();
  }
};

int run_admin_flags(const GlobalOptions& global, const AdminFlags& flags) {
  if (flags.zero_stats) {
    open_store(global)->zero_stats();
    std::printf("Statistics zeroed\n");
  }
  if (flags.clear) {
    cache::CleanupResult r = open_store(global)->clear();
    std::printf("Cleared %llu entries (%s) and %llu manifests\n",
                static_cast<unsigned long long>(r.entries_removed),
                format_size(r.bytes_removed).c_str(),
                static_cast<unsigned long long>(r.manifests_removed));
  }
  if (!flags.evict_older_than.empty()) {
    std::chrono::seconds age = parse_age(flags.evict_older_than);
    cache::CleanupResult r = open_store(global)->evict_older_than(age);
    std::printf(
        "Evicted %llu entries (%s) and %llu manifests not used for %s\n",
        static_cast<unsigned long long>(r.entries_removed), format_size(r.bytes_removed).c_str(),
        static_cast<unsigned long long>(r.manifests_removed), flags.evict_older_than.c_str());
  }
  if (!flags.max_size.empty()) {
    uint64_t bytes = parse_size(flags.max_size);
    open_store(global)->set_max_size(bytes);
    std::printf("Set the size limit to %s\n", bytes ? format_size(bytes).c_str() : "no limit");
  }
  if (flags.cleanup) {
    cache::CleanupResult r = open_store(global)->cleanup();
    std::printf(
        "Cleaned up: removed %llu entries (%s), %llu manifests and %llu stray files; adopted %llu "
        "blob files the index did not name\n",
        static_cast<unsigned long long>(r.entries_removed), format_size(r.bytes_removed).c_str(),
        static_cast<unsigned long long>(r.manifests_removed),
        static_cast<unsigned long long>(r.stray_files_removed),
        static_cast<unsigned long long>(r.stray_files_adopted));
  }
  if (flags.show_stats) return show_stats(global);
  return kExitOk;
}

}  // namespace

void add_admin_commands(CLI::App& app, Dispatch& dispatch) {
  // Shared with the parse callback below, which runs after all flags are read.
  auto flags = std::make_shared<AdminFlags>();
  app.add_flag("-s,--show-stats", flags->show_stats, "Show statistics of the local store");
  app.add_flag("-z,--zero-stats", flags->zero_stats, "Zero the statistics counters");
  app.add_flag("-C,--clear", flags->clear, "Remove every entry");
  app.add_flag("-c,--cleanup", flags->cleanup,
               "Enforce the size limit and remove files left by killed processes");
  app.add_option(
      "-M,--max-size", flags->max_size,
      "Set the size limit: 5G, 500M, 1.5GiB (powers of 1024; no unit means G); 0 for no limit");
  app.add_option("--evict-older-than", flags->evict_older_than,
                 "Remove entries not used for AGE: 3600s, 30m, 12h, 7d (no unit means days)");
  // The main app's callback runs after any verb's, so it can refuse a mix.
  app.callback([flags, &dispatch] {
    if (!flags->any()) return;
    if (dispatch.action) {
      throw CLI::ValidationError("-s, -z, -C, -c, -M and --evict-older-than",
                                 "cannot be combined with the verb " + dispatch.verb);
    }
    dispatch.action = [flags, &dispatch] { return run_admin_flags(dispatch.global, *flags); };
  });

  CLI::App* verify = app.add_subcommand(
      "verify",
      "Check the index (SQLite's quick_check; a damaged one is rebuilt from the blob files) and "
      "every entry; remove and report corrupt ones (exit 1 if any were found)");
  verify->callback([&dispatch] {
    dispatch.verb = "verify";
    dispatch.action = [&dispatch] { return verify_store(dispatch.global); };
  });

  CLI::App* ls = app.add_subcommand(
      "ls",
      "List entries, most recently used first: when last used, arch, size, NVRTC's compile time, "
      "key, the source compiled and its kernels (each entry is read for these)");
  ls->callback([&dispatch] {
    dispatch.verb = "ls";
    dispatch.action = [&dispatch] { return list_entries(dispatch.global); };
  });

  auto show_args = std::make_shared<std::pair<std::string, std::string>>();
  CLI::App* show = app.add_subcommand("show", "Show one entry's metadata");
  show->add_option("KEY", show_args->first, "The entry's key (32 hex digits)")->required();
  show->add_option("--payload-out", show_args->second,
                   "Also write the entry's PTX or cubin to this file");
  show->callback([show_args, &dispatch] {
    dispatch.verb = "show";
    dispatch.action = [show_args, &dispatch] {
      return show_entry(dispatch.global, show_args->first, show_args->second);
    };
  });

  auto export_path = std::make_shared<std::string>();
  CLI::App* exp = app.add_subcommand("export", "Write every entry to one archive file");
  exp->add_option("FILE", *export_path, "Archive to write")->required();
  exp->callback([export_path, &dispatch] {
    dispatch.verb = "export";
    dispatch.action = [export_path, &dispatch] { return export_to(dispatch.global, *export_path); };
  });

  auto import_path = std::make_shared<std::string>();
  CLI::App* imp = app.add_subcommand(
      "import", "Add the entries of an archive that the store lacks (exit 1 if any were damaged)");
  imp->add_option("FILE", *import_path, "Archive written by `kcache export`")
      ->required()
      ->check(CLI::ExistingFile);
  imp->callback([import_path, &dispatch] {
    dispatch.verb = "import";
    dispatch.action = [import_path, &dispatch] {
      return import_from(dispatch.global, *import_path);
    };
  });
}

}  // namespace kcache::cli
