// A served compile's keys (CompileOptions::serve, issue 27 session 9;
// docs/KEYS.md): paths beneath the working folder keyed relative to it, so
// checkouts and Bazel sandboxes share entries; the working folder and the
// toolkit's folders keyed only where an option writes file names into the
// output; and what may not be stored because an output names a folder that
// is not keyed.
#pragma once

#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "cache/format/key.h"
#include "cache/format/manifest.h"
#include "compiler/nvrtc/nvrtc.h"

namespace kcache::compiler {

// Options that key the working folder and a toolkit folder.
constexpr char kWorkingFolderOption[] = "--kcache-working-folder=";
constexpr char kToolkitFolderOption[] = "--kcache-toolkit-folder=";

// This process's working folder (absolute), or empty.
std::string working_folder();

// The folder a compile works in (CompileOptions::working_folder): `given` by
// the name NVRTC's getcwd() gives there (its real name; lexically normalised
// and absolute where it has none); empty `given`: working_folder().
std::string compile_folder(const std::string& given);

// The compile folder `folder` as NVRTC spells it in the names it writes (-G
// and -lineinfo line tables): $PWD, byte for byte, where it is an absolute
// name of that folder (a folder reached through a link keeps the link's
// name, as a shell's $PWD does; "//", "/./", "/../" and a trailing "/" stay),
// else `folder`. NVRTC reads $PWD in whatever folder it compiles, so a
// given folder that $PWD does not name is spelled as compile_folder names it.
std::string folder_spelling(const std::string& folder);
// The process's own folder's spelling: folder_spelling(working_folder()).
std::string working_folder_spelling();

// The option that keys the working folder's spelling where it is not
// working_folder() (a link): outputs that name files name it.
constexpr char kWorkingFolderSpellingOption[] = "--kcache-working-folder-spelling=";

// Whether `path` is `folder` or beneath it (lexically).
bool beneath(const std::string& path, const std::string& folder);

// Options with which NVRTC writes file names (its working folder) into the
// output: -G, -lineinfo and their spellings, -dlto, -optix-ir.
bool writes_working_folder(const std::vector<std::string>& options);

// Whether `text` names `folder` (or a path beneath it), as a whole name:
// "/ws" is not named by "/ws2" or "/ws-deps".
bool names_folder(std::string_view text, const std::string& folder);

// Whether an output (PTX, an image, a log) names `folder`: as text, or as
// PTX writes a string's bytes (`$str[9] = {47, 116, 109, ...}`).
bool output_names(std::string_view output, const std::string& folder);

// Names beneath the program's folder that were not (only) taken from it:
// a program in the working folder has NVRTC's names there (__nv_name_map)
// beneath it too, and an -I into the folder reaches it by an absolute name.
struct NotTheFolders {
  std::set<std::string> absolute;  // keyed by their absolute name
  std::set<std::string> both;      // keyed so and relative to the folder
  // Of `both`, those NVRTC also named relative to the folder: the relative
  // copy is a name it used, whose file identity is keyed (served_keys.cc).
  std::set<std::string> used_relative;
};

// Probes beneath `folder` written as kSourceFolderPrefix + the rest, the
// way lookup records write them (those in `not_its` kept absolute, or also
// so, the copy without a file identity); kept sorted by path.
void relative_to_program_folder(const std::string& folder, const NotTheFolders& not_its,
                                std::vector<cache::ManifestProbe>* probes);

// Keys `probes` (a served `kcache compile`'s) relative to the working folder
// where NVRTC's answer follows it (see the definition); returns why the
// result may not be stored, or empty.
// `folder` is the compile's (compile_folder), `spelling` its folder_spelling.
std::string key_beneath_working_folder(const cache::CompileRequest& request,
                                       const NvrtcOutput& out, const std::string& folder,
                                       const std::string& spelling,
                                       std::vector<cache::ManifestProbe>* probes);

// The first name NVRTC was answered "no such file" for beneath the driver's
// JIT cache (an `own:` probe) that lies in `folder` (or is it), of those
// named relative to the working folder only where `relative` is given
// (NvrtcOutput::relative_names); empty for none. Such an `own:` line names
// this folder's path, while in another folder the same name is no
// driver's: a result keyed relative to the working folder is then not
// stored, and one that would serve programs in other folders not shared.
// Names the driver gave absolutely ($HOME's) elsewhere are the same for
// every compile in the same environment.
std::string driver_cache_in_folder(const std::vector<cache::ManifestProbe>& probes,
                                   const std::string& folder,
                                   const std::vector<std::string>* relative);

// A served compile (a program's too): why an image naming a toolkit folder
// nothing keyed names may not be stored, or empty.
std::string toolkit_named_unkeyed(const cache::CompileRequest& request, const NvrtcOutput& out,
                                  const std::vector<std::string>& toolkit_dirs);

// The paths a served compile's NVRTC read and looked at (absolute).
std::vector<std::string> named_paths(const NvrtcOutput& out);

// The files a manifest set found present, as absolute paths (those beneath
// the compile's working folder `folder` written relative to it,
// kSourceFolderPrefix).
std::vector<std::string> present_files(const std::vector<cache::ManifestProbe>& probes,
                                       const std::string& folder);

}  // namespace kcache::compiler
