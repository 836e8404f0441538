#include "compiler/served_keys.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <climits>
#include <cstdlib>
#include <string>

#include "common/environment.h"
#include "common/paths.h"
#include "compiler/seal/probes.h"
#include "compiler/lookup_record.h"
#include "compiler/seal/probes.h"

namespace kcache::compiler {

namespace {

// Whether `c` may go on a path name's last part ("/ws" in "/ws2", "/ws-deps",
// "/ws.old" names another folder).
bool continues_name(unsigned char c) {
  return std::isalnum(c) || c == '.' || c == '_' || c == '-' || c == '+' || c == '~' ||
         c == '@' || c >= 0x80;
}

// Whether anything the request keys holds `folder`'s name.
bool request_names(const cache::CompileRequest& request, const std::string& folder) {
  bool named = names_folder(request.source_name, folder) || names_folder(request.source, folder);
  for (const std::vector<std::string>* list : {&request.options, &request.name_expressions}) {
    for (const std::string& item : *list) named = named || names_folder(item, folder);
  }
  for (const cache::Header& h : request.headers) named = named || names_folder(h.content, folder);
  return named;
}

}  // namespace

std::string working_folder() {
  char cwd[PATH_MAX];
  return ::getcwd(cwd, sizeof cwd) ? std::string(cwd) : std::string();
}

std::string compile_folder(const std::string& given) {
  if (given.empty()) return working_folder();
  char real[PATH_MAX];
  if (::realpath(given.c_str(), real)) return real;
  // Not there (the compile will say so): the name as given, made absolute.
  return without_dot_parts(given.front() == '/' ? given : working_folder() + "/" + given);
}

std::string working_folder_spelling() { return folder_spelling(working_folder()); }

// $PWD is read here, not in cache/config: it is this process's state at the
// moment of the compile (as getcwd is), which NVRTC reads itself.
std::string folder_spelling(const std::string& cwd) {
  const char* pwd = env::read(env::Var::pwd);
  if (!pwd || pwd[0] != '/' || cwd.empty()) return cwd;
  // Verbatim, as glibc's get_current_dir_name takes it: NVRTC writes "//",
  // "/./", "/../" and a trailing "/" of $PWD into -G and -lineinfo outputs
  // (measured: stale_hit_pwd_spelling_test), so no spelling is normalized.
  const std::string spelling = pwd;
  struct stat a, b;
  if (::stat(spelling.c_str(), &a) != 0 || ::stat(cwd.c_str(), &b) != 0 || a.st_dev != b.st_dev ||
      a.st_ino != b.st_ino) {
    return cwd;
  }
  return spelling;
}

// Whether `path` is `folder` or beneath it (lexically).
bool beneath(const std::string& path, const std::string& folder) {
  return path == folder || path.rfind(folder + "/", 0) == 0;
}

// Options with which NVRTC writes its working folder into the output
// (measured with NVRTC 13: -G for any source name, -lineinfo for a relative
// one), and those whose output kcache does not look into.
bool writes_working_folder(const std::vector<std::string>& options) {
  static const char* const kNames[] = {"G",    "device-debug",   "lineinfo", "generate-line-info",
                                       "dlto", "dlink-time-opt", "optix-ir", "gen-opt-lto"};
  for (const std::string& o : options) {
    std::string_view name(o);
    while (!name.empty() && name.front() == '-') name.remove_prefix(1);
    for (const char* n : kNames) {
      if (name == n) return true;
    }
  }
  return false;
}

// Probes beneath `folder` written as kSourceFolderPrefix + the rest, the
// way lookup records write them (those in `not_its` kept absolute, or also
// so); kept sorted by path.
void relative_to_program_folder(const std::string& folder, const NotTheFolders& not_its,
                                std::vector<cache::ManifestProbe>* probes) {
  if (folder.empty()) return;
  std::vector<cache::ManifestProbe> also;
  for (cache::ManifestProbe& p : *probes) {
    if (!beneath(p.path, folder)) continue;
    if (not_its.absolute.count(p.path)) continue;
    const bool copy = not_its.both.count(p.path) > 0;
    // A copy of a name NVRTC never used relative to the folder: which file it
    // is says nothing (probes.h, one file or two), and elsewhere it is another
    // file. One it used both ways keeps it: NVRTC's #pragma once took the two
    // names for one file here (differential seed 64), and elsewhere they are
    // two.
    const bool unused = copy && !not_its.used_relative.count(p.path);
    cache::ManifestProbe& relative = copy ? also.emplace_back(p) : p;
    relative.path = kSourceFolderPrefix + relative.path.substr(folder.size());
    if (unused) relative.dev = relative.ino = 0;
    if (relative.has_folder) {  // its folder's depth was counted from "/": stat the name itself
      relative.has_folder = false;
      relative.folder_depth = 0;
      relative.dev = relative.ino = relative.mtime_ns = relative.ctime_ns = 0;
    }
  }
  probes->insert(probes->end(), also.begin(), also.end());
  std::sort(probes->begin(), probes->end(),
            [](const cache::ManifestProbe& a, const cache::ManifestProbe& b) {
              return a.path < b.path;
            });
}

// Whether `text` names `folder` (or a path beneath it).
bool names_folder(std::string_view text, const std::string& folder) {
  for (size_t at = text.find(folder); at != std::string_view::npos;
       at = text.find(folder, at + 1)) {
    const size_t end = at + folder.size();
    if (end == text.size() || !continues_name(static_cast<unsigned char>(text[end]))) return true;
  }
  return false;
}

// Whether an output (PTX, an image, a log) names `folder`: as text, or as
// PTX writes a string's bytes (`$str[9] = {47, 116, 109, ...}`).
bool output_names(std::string_view output, const std::string& folder) {
  if (names_folder(output, folder)) return true;
  std::string bytes;
  for (unsigned char c : folder) bytes += (bytes.empty() ? "" : ", ") + std::to_string(c);
  for (size_t at = output.find(bytes); at != std::string_view::npos;
       at = output.find(bytes, at + 1)) {
    // A whole number: after "{" or ", ", before "}" or ", " and the next byte.
    if (at < 1 || (output[at - 1] != '{' && output[at - 1] != ' ')) continue;
    std::string_view rest = output.substr(at + bytes.size());
    if (!rest.empty() && rest.front() == '}') return true;
    if (rest.compare(0, 2, ", ") != 0) continue;
    int next = 0;
    size_t i = 2;
    for (; i < rest.size() && i < 5 && std::isdigit(static_cast<unsigned char>(rest[i])); ++i) {
      next = next * 10 + (rest[i] - '0');
    }
    if (i > 2 && (next > 255 || !continues_name(static_cast<unsigned char>(next)))) return true;
  }
  return false;
}

// Where nothing keyed names the working folder (by getcwd's name or by the
// spelling NVRTC writes), NVRTC can only have had it from the kernel, so an
// output that names it would be handed to a lookup elsewhere: returns why
// the result may not be stored, or empty.
std::string working_folder_named_unkeyed(const cache::CompileRequest& request,
                                         const NvrtcOutput& out, const std::string& cwd,
                                         const std::string& spelling) {
  for (const std::string* folder : {&cwd, &spelling}) {
    if (folder->size() <= 1 || request_names(request, *folder)) continue;
    for (const std::string* text : {&out.image, &out.ptx, &out.log}) {
      if (output_names(*text, *folder)) {
        return "NVRTC's output names the working folder " + *folder + ", which is not keyed";
      }
    }
  }
  return "";
}

// Served (CompileOptions::serve): paths beneath the working folder are keyed
// relative to it, so a lookup in another checkout checks them beneath its
// own. A name NVRTC gave relative to its working folder is keyed so; so are
// the working folder and the folders down to the program's, which NVRTC
// names by absolute names it builds with getcwd (measured). Any other path
// beneath the working folder that NVRTC named absolutely (an absolute -I or
// source, an absolute #include, even in a header the scanner never read) is
// checked both by that name and beneath the lookup's working folder.
// Returns why the result cannot be stored (working_folder_named_unkeyed).
std::string key_beneath_working_folder(const cache::CompileRequest& request,
                                       const NvrtcOutput& out, const std::string& cwd,
                                       const std::string& spelling,
                                       std::vector<cache::ManifestProbe>* probes) {
  if (cwd.size() <= 1) return "";  // keyed (resolve): "/" is beneath nothing
  const std::string& name = request.source_name;
  const std::string program_folder =
      !name.empty() && name.front() == '/' ? parent_folder(name)
                                           : without_dot_parts(cwd + "/" + parent_folder(name));
  const std::set<std::string> relative(out.relative_names.begin(), out.relative_names.end());
  const std::set<std::string> absolute(out.absolute_names.begin(), out.absolute_names.end());
  NotTheFolders not_its;
  for (const cache::ManifestProbe& p : *probes) {
    if (!beneath(p.path, cwd)) continue;
    const bool only_relative = relative.count(p.path) && !absolute.count(p.path);
    const bool from_getcwd = beneath(program_folder, p.path);
    if (!only_relative && !from_getcwd) {
      not_its.both.insert(p.path);
      if (relative.count(p.path)) not_its.used_relative.insert(p.path);
    }
  }
  relative_to_program_folder(cwd, not_its, probes);
  return working_folder_named_unkeyed(request, out, cwd, spelling);
}

std::string driver_cache_in_folder(const std::vector<cache::ManifestProbe>& probes,
                                   const std::string& folder,
                                   const std::vector<std::string>* relative) {
  if (folder.size() <= 1) return "";
  const std::string_view label = kDriverCacheLabel;
  for (const cache::ManifestProbe& p : probes) {
    if (p.path.compare(0, label.size(), label) != 0) continue;
    const std::string path = p.path.substr(label.size());
    if (path != folder && !beneath(path, folder)) continue;
    if (relative && std::find(relative->begin(), relative->end(), path) == relative->end()) {
      continue;
    }
    return path;
  }
  return "";
}

// A served compile (CompileOptions::served): the toolkit's folders are keyed
// by what NVRTC read beneath them, not by where they are (a toolkit moved
// keeps its keys), unless the options name them (a program's -I, or where an
// option writes file names into the output: resolve). An image naming one
// that is not keyed (a toolkit header's __FILE__) is not storable: returns
// why.
std::string toolkit_named_unkeyed(const cache::CompileRequest& request, const NvrtcOutput& out,
                                  const std::vector<std::string>& toolkit_dirs) {
  std::vector<const std::string*> images = {&out.image, &out.ptx};
  if (out.program) {
    for (cache::ProgramOutput o : {cache::ProgramOutput::ptx, cache::ProgramOutput::cubin}) {
      images.push_back(&out.program->output(o).bytes);
    }
  }
  for (const std::string& d : toolkit_dirs) {
    for (const std::string* image : images) {
      if (output_names(*image, d) && !request_names(request, d)) {
        return "NVRTC's output names the toolkit folder " + d + ", which is not keyed";
      }
    }
  }
  return "";
}

// The paths a served compile's NVRTC read and looked at.
std::vector<std::string> named_paths(const NvrtcOutput& out) {
  std::vector<std::string> paths = out.probes;
  for (const ServedFile& f : out.served) paths.push_back(f.path);
  return paths;
}

// The files a manifest set found present (`probes`, beneath the working
// folder as kSourceFolderPrefix paths), as absolute paths.
std::vector<std::string> present_files(const std::vector<cache::ManifestProbe>& probes,
                                       const std::string& cwd) {
  const size_t label = std::char_traits<char>::length(kSourceFolderPrefix);
  std::vector<std::string> paths;
  for (const cache::ManifestProbe& p : probes) {
    if (!p.present) continue;
    if (p.path.compare(0, label, kSourceFolderPrefix) == 0) {
      paths.push_back(cwd + p.path.substr(label));
    } else if (!p.path.empty() && p.path.front() == '/') {
      paths.push_back(p.path);
    }
  }
  return paths;
}

}  // namespace kcache::compiler
