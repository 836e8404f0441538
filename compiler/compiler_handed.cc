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

// Where the file NVRTC names `includer` in a complaint was read, if known:
// the source or a handed header of that name, or one whose `#line`
// directives give that name (NVRTC names a file so after a #line, while it
// still searches the real file's folder). Several files in one folder are
// fine, only the folder matters; files in different folders are an error
// (InvalidArgument): the complaint does not say which one asked.
// `disk_name`: NVRTC's name for the includer found (includes.h, disk_name_next_to).
std::optional<std::string> find_includer(const parts::AskContext& c, const std::string& includer,
                                         const std::vector<ResolvedHeader>& have,
                                         std::string* disk_name) {
  std::vector<std::string> exact, by_line;
  std::vector<std::string> exact_names, by_line_names;
  // `shown`: how NVRTC names the file in a complaint (its #line name, where
  // kcache hands it one); `disk`: its name on disk, whose folder a quoted
  // include continues from.
  auto consider = [&](const std::string& shown, const std::string& disk,
                      const std::vector<std::string>& line_names, const std::string& path) {
    if (shown == includer) {
      exact.push_back(path);
      exact_names.push_back(disk);
    } else if (std::find(line_names.begin(), line_names.end(), includer) != line_names.end()) {
      by_line.push_back(path);
      by_line_names.push_back(disk);
    }
  };
  const std::string& root = c.options.logical_name();
  consider(root, root, c.includes.root_line_names, c.options.source_path);
  for (const std::vector<ResolvedHeader>* list : {&c.includes.headers, &have}) {
    for (const ResolvedHeader& h : *list) {
      consider(nvrtc_name(h), h.disk_name.empty() ? h.name : h.disk_name, h.line_names, h.path);
    }
  }
  exact.insert(exact.end(), by_line.begin(), by_line.end());
  exact_names.insert(exact_names.end(), by_line_names.begin(), by_line_names.end());
  for (const std::string& path : exact) {
    if (parts::folder_of(path) != parts::folder_of(exact.front())) {
      throw InvalidArgument(
          "NVRTC names the includer of an include it asks for \"" + includer + "\", and both " +
          exact.front() + " and " + path +
          " are named so (one by a #line directive); they lie in different folders, so kcache "
          "cannot tell where a quoted include is searched. Give the #line another name.");
    }
  }
  if (exact.empty()) return std::nullopt;
  *disk_name = exact_names.front();
  return exact.front();
}

// Finds the header NVRTC asked for where NVRTC would have (quoted: the
// includer's folder, then -I in order; angled: -I in order; the toolkit's
// folders NVRTC searched itself), with the literal includes it makes that are
// not handed yet. Nullopt if it is nowhere (`searched` then lists the folders
// looked in, `refused` the first existing file may_read refused, if any);
// `includer_path` is where the includer was read, if known.
// Throws what resolve_includes throws.
std::optional<std::vector<ResolvedHeader>> resolve_ask(
    const parts::AskContext& c, const AskedInclude& a, const std::vector<ResolvedHeader>& have,
    std::string* searched, std::optional<std::string>* includer_path, std::string* refused) {
  const CompileOptions& options = c.options;
  std::string includer_name;
  *includer_path = find_includer(c, a.includer, have, &includer_name);
  std::vector<std::string> dirs;
  if (!a.angled && *includer_path) dirs.push_back(parts::folder_of(**includer_path));
  const size_t first_dash_i = dirs.size();
  dirs.insert(dirs.end(), options.include_dirs.begin(), options.include_dirs.end());
  for (size_t k = 0; k < dirs.size(); ++k) {
    const std::string& d = dirs[k];
    std::string path = d.empty() ? a.name : d + "/" + a.name;
    if (a.name.front() == '/') path = a.name;
    std::optional<std::string> content;
    if (!options.may_read || options.may_read(path)) {
      observe_path(path);               // a lookup record (lookup_record.h) holds it
      content = read_input_file(path);  // a regular file, bounded (issue 27)
    } else if (refused->empty()) {
      std::optional<FileInfo> info = FileSystem::real().stat(path);
      if (info && !info->is_directory) *refused = path;
    }
    if (!content) {
      *searched += (searched->empty() ? "" : ", ") + (d.empty() ? std::string(".") : d);
      continue;
    }
    std::set<std::string> handed = c.base;
    for (const ResolvedHeader& h : have) handed.insert(h.name);
    handed.insert(a.name);
    // Where its #include_next goes on (includes.h): after its -I folder.
    int next_from = a.name.front() == '/' ? -1
                    : k < first_dash_i    ? 0
                                          : static_cast<int>(k - first_dash_i) + 1;
    std::string disk_name = a.name.front() == '/' ? a.name
                            : k < first_dash_i    ? disk_name_next_to(includer_name, a.name)
                                                  : disk_name_in(d, a.name);
    IncludeGraph more = resolve_includes(path, *content,
                                         {options.include_dirs,
                                          c.toolkit_dirs,
                                          options.may_read,
                                          next_from,
                                          parts::scan_options(options),
                                          {},
                                          disk_name});
    std::vector<ResolvedHeader> out{{a.name, path,
                                     more.root_content ? *more.root_content : *content,
                                     more.root_line_names, disk_name}};
    for (ResolvedHeader& h : more.headers) {
      if (handed.insert(h.name).second) out.push_back(std::move(h));
    }
    return out;
  }
  return std::nullopt;
}

}  // namespace

namespace parts {

// The key of a result that needed asked headers: everything handed, with the
// contents given (read from disk now, never taken from a manifest).
// The asks themselves are keyed too (cache/format/key.h), so the entry a replay
// finds was made by a compile whose NVRTC asked for exactly these names from
// exactly these includers.
// `today`: __DATE__'s value, keyed where an asked header uses it (empty:
// sloppy about time macros).
Hash128 full_key(cache::CompileRequest request, const std::vector<ResolvedHeader>& asked,
                 const cache::ManifestSet& asks, const std::string& today) {
  request.probes = probe_key_lines(asks.probes);
  for (const ResolvedHeader& h : asked) request.headers.push_back({h.name, handed_text(h)});
  if (!today.empty() && request.date.empty() && parts::any_uses_date_macro(asked))
    request.date = today;
  for (const cache::ManifestAsk& a : asks) {
    request.asked_includes.push_back(a.spelling + "\n" + a.includer + "\n" +
                                     (a.angled ? "angled" : "quoted"));
  }
  std::sort(request.headers.begin(), request.headers.end(),
            [](const cache::Header& a, const cache::Header& b) {
              return a.include_name < b.include_name;
            });
  return cache::compute_key(request);
}

// Replays a manifest set against the disk: the headers it hands when every
// ask resolves to the recorded names and contents, else nullopt.
// `why`: what did not resolve the same, as a user reads it (a miss's reason).
std::optional<std::vector<ResolvedHeader>> replay(const parts::AskContext& c,
                                                  const cache::ManifestSet& set, std::string* why) {
  std::vector<ResolvedHeader> have;
  try {
    for (const cache::ManifestAsk& recorded : set) {
      AskedInclude a;
      a.name = recorded.spelling;
      a.includer = recorded.includer;
      a.angled = recorded.angled;
      std::string searched, refused;
      std::optional<std::string> includer_path;
      std::optional<std::vector<ResolvedHeader>> got =
          resolve_ask(c, a, have, &searched, &includer_path, &refused);
      if (!got || got->size() != recorded.headers.size()) {
        *why = "the headers \"" + a.name + "\" brings changed";
        return std::nullopt;
      }
      for (size_t i = 0; i < got->size(); ++i) {
        const ResolvedHeader& h = (*got)[i];
        if (h.name != recorded.headers[i].name ||
            xxh3_64(h.content) != recorded.headers[i].content_hash) {
          *why = h.path + " changed";
          return std::nullopt;
        }
      }
      for (ResolvedHeader& h : *got) have.push_back(std::move(h));
    }
  } catch (const Error& e) {
    *why = e.what();
    return std::nullopt;  // unreadable, ambiguous: the compile will say so
  }
  if (!probes_hold(set.probes, c.probes, why)) return std::nullopt;
  // Such a compile is never stored, but a sloppy one may have been.
  if (c.check_time_macros && parts::any_uses_time_macros(have)) {
    *why = "a header it includes uses __TIME__ or __TIMESTAMP__";
    return std::nullopt;
  }
  return have;
}

// The names handed to NVRTC before it asks for any: the scanner's headers and
// the stubs of the includes it could not find.
std::set<std::string> handed_names(const IncludeGraph& includes) {
  std::set<std::string> names;
  for (const ResolvedHeader& h : includes.headers) names.insert(h.name);
  for (const MissingInclude& m : includes.missing) {
    if (!m.stub.empty()) names.insert(m.name);
  }
  return names;
}

// An include NVRTC asked for, found where NVRTC would have looked, or a
// CompileError that says where kcache looked (and the hdrs/deps hint for an
// undeclared one, undeclared.h).
std::vector<ResolvedHeader> resolve_asked(const parts::AskContext& c, const AskedInclude& a,
                                          const std::vector<ResolvedHeader>& have,
                                          const CompileError& e) {
  const CompileOptions& options = c.options;
  std::string searched;
  std::string refused;  // the first existing file may_read refused
  std::optional<std::string> includer_path;
  if (std::optional<std::vector<ResolvedHeader>> out =
          resolve_ask(c, a, have, &searched, &includer_path, &refused)) {
    return std::move(*out);
  }
  for (const std::string& d : c.toolkit_dirs) searched += (searched.empty() ? "" : ", ") + d;
  std::string message = "\"" + a.name + "\" (included from " +
                        (includer_path ? *includer_path : a.includer) + ":" +
                        std::to_string(a.line) + ") was not found in: " + searched;
  // may_read is Bazel's worker honouring the action's declared inputs
  // (cli/declared_inputs.h): say which declaration is missing.
  if (refused.empty()) {  // sandboxed: the file is not there at all (undeclared.h)
    std::vector<std::string> dirs = options.include_dirs;
    if (!a.angled && includer_path) dirs.insert(dirs.begin(), parts::folder_of(*includer_path));
    refused = find_undeclared(a.name, dirs, options.source_path).value_or("");
  }
  if (!refused.empty()) {
    // The hint first and alone; NVRTC's log adds nothing to it.
    throw CompileError(undeclared_hint(refused, options.target_label) + "\n  " + message, "",
                       e.options());
  }
  throw CompileError("kcache: " + message, "kcache: " + message + "\n" + e.log(), e.options());
}

}  // namespace parts

}  // namespace kcache::compiler
