// What differs between the two kinds of compile, as one small value that
// the one compile path reads (compiler.h; docs/KEYS.md's glossary). Both are
// served: NVRTC reads the disk itself through the serving seal (seal/seal.h)
// and every file it read is keyed by the bytes it was served.
//
//   served   kcache compile, cuda_kernel, prewarm, the runtime JIT: paths
//            beneath the compile's working folder (CompileOptions::
//            working_folder) keyed relative to it.
//   program  the drop-in libnvrtc: NVRTC's answers kept as a program
//            record, paths beneath the program's folder keyed relative to
//            it where the name check allows (program.h).
#pragma once

#include <string>
#include <vector>

namespace kcache::compiler {

struct CompileOptions;

enum class Namespace { served, program };

struct KeyRecipe {
  Namespace ns = Namespace::served;
  // The scanner starts from the logical name (served: NVRTC searches next to
  // it), else from the source's path.
  bool scans_from_name = false;
  // The toolkit's include folders are passed to NVRTC (not to a program,
  // which gets what it asked for).
  bool adds_toolkit_includes = true;
  // An unsupported arch is an error before compiling (a program's is
  // NVRTC's own answer, in its record).
  bool checks_archs = true;
  // The entry holds NVRTC's every answer (cache::ProgramRecord), a rejected
  // source included, and no bundle is made.
  bool keeps_program_answers = false;
  // Paths beneath the working folder are keyed relative to it, and an
  // output that names it unkeyed is not stored (served_keys.h).
  bool keys_relative_to_working_folder = false;
  // Names a lookup checks in "the program's folder" are taken from: the
  // program's folder (program), the working folder (served).
  enum class Folder { working, program } probe_folder = Folder::working;
  // Names the namespace in the key (cache::CompileRequest::image_pass), so
  // two namespaces never share an entry.
  std::string image_pass;

  // Whether the working folder itself is keyed: where an option writes it
  // into the output (-G, -lineinfo), and for a program where a relative name
  // or -I folder is taken from it (served: where it is "/", which relative
  // keys cannot stand for).
  bool keys_working_folder(const CompileOptions& options,
                           const std::vector<std::string>& key_options,
                           const std::string& working_folder) const;
};

// The recipe for `options` (CompileOptions::program).
KeyRecipe recipe_for(const CompileOptions& options);

}  // namespace kcache::compiler
