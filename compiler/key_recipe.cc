#include "compiler/key_recipe.h"

#include "cache/format/program_record.h"
#include "compiler/compiler.h"
#include "compiler/served_keys.h"

namespace kcache::compiler {

KeyRecipe recipe_for(const CompileOptions& options) {
  KeyRecipe r;
  if (options.program) {
    r.ns = Namespace::program;
    r.adds_toolkit_includes = false;
    r.checks_archs = false;
    r.keeps_program_answers = true;
    r.probe_folder = KeyRecipe::Folder::program;
    r.image_pass = "nvrtc-program; record v" + std::to_string(cache::kProgramRecordVersion) +
                   "; disk served v1";
    return r;
  }
  r.ns = Namespace::served;
  r.scans_from_name = true;
  r.keys_relative_to_working_folder = true;
  r.probe_folder = KeyRecipe::Folder::working;
  r.image_pass = "disk served v1";
  return r;
}

bool KeyRecipe::keys_working_folder(const CompileOptions& options,
                                    const std::vector<std::string>& key_options,
                                    const std::string& working_folder) const {
  if (writes_working_folder(key_options)) return true;
  if (ns == Namespace::served) return working_folder.size() <= 1;
  // A program: where a relative name is taken from decides which files a
  // computed include reaches.
  auto relative = [](const std::string& path) { return path.empty() || path.front() != '/'; };
  if (relative(options.logical_name())) return true;
  for (const std::string& d : options.include_dirs) {
    if (relative(d)) return true;
  }
  return false;
}

}  // namespace kcache::compiler
