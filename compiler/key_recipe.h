// What differs between the three kinds of compile, as one small value that
// the one compile path reads (compiler.h; docs/KEYS.md's glossary):
//
//   handed   CompileOptions::serve off (no caller left; tests use it):
//            NVRTC is handed the source and every user header in memory, by
//            the names the scanner (includes.h) resolved; a header it asks
//            for is resolved as NVRTC would and handed in another round.
//            Keyed by what was handed.
//   served   kcache compile, cuda_kernel, prewarm, the runtime JIT: NVRTC
//            reads the disk itself through the serving seal (seal/seal.h);
//            every file it read is keyed by the bytes it was served, paths
//            beneath the compile's working folder (CompileOptions::
//            working_folder) relative to it.
//   program  the drop-in libnvrtc: served, with NVRTC's answers kept as a
//            program record, paths beneath the program's folder keyed
//            relative to it where the name check allows (program.h).
#pragma once

#include <string>
#include <vector>

namespace kcache::compiler {

struct CompileOptions;

enum class Namespace { handed, served, program };

struct KeyRecipe {
  Namespace ns = Namespace::handed;
  // NVRTC reads the disk through the serving seal; else user headers are
  // handed in memory and NVRTC may read only the toolkit's folders.
  bool serves_disk = false;
  // The scanner's headers are part of the first key a lookup computes
  // (handed). Served and program, NVRTC reads the disk itself and every
  // file it read is keyed through the manifest, so the scanner runs only
  // for a failed compile's hints (a program's in-memory headers are keyed
  // as given).
  bool scans_for_key = true;
  // A header NVRTC could not open is resolved by kcache and handed in
  // another round (handed only: served, "cannot open" is the disk's answer).
  bool hands_asked_headers = true;
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
  // program's folder (program), the working folder (served), none (handed).
  enum class Folder { none, working, program } probe_folder = Folder::none;
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

// The recipe for `options` (CompileOptions::program, ::serve).
KeyRecipe recipe_for(const CompileOptions& options);

}  // namespace kcache::compiler
