// NVRTC, opened with dlopen (jitify2's way): one table of function pointers,
// filled once per library path, and an error that names the missing library or
// symbol. kcache links no NVRTC, so a cache hit never loads it.
//
// Thread safety: Nvrtc::open() and every method may be called from any number
// of threads at once (NVRTC compiles separate programs concurrently).
//
// Sealing: NVRTC looks on disk for any include it was not handed in memory,
// relative to the folder of the including file's *name* (the source name, or
// a handed header's spelling, both taken relative to the working directory),
// by any absolute name it forms, and in its -I folders. compile() therefore
// runs NVRTC under the seal (seal.h): a thread whose working directory is a
// chain of deleted folders and which the kernel (Landlock) lets read nothing
// but the folders given with -I (the toolkit's only), NVRTC's own libraries
// and the system files it opens by itself; every path it names is recorded
// (NvrtcOutput::probes) so the caller can key what it read from the toolkit
// and what it found absent. An absolute source name is handed as
// "/kcache-sealed/<name>", a folder that does not exist. A user file NVRTC
// tries to open fails with EACCES: an #include of it is a "cannot open source
// file" error naming it, which the compiler answers by handing it over.
//
// Serving (NvrtcInput::serve_disk, the drop-in's programs): NVRTC gets the
// program's own options and working folder instead, Landlock lets it read
// only its own files, and every other file it opens is served from a hashed
// snapshot (seal.h, SealPolicy::serve), listed in NvrtcOutput::served.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "cache/format/entry.h"
#include "cache/format/program_record.h"
#include "compiler/seal/seal.h"

namespace kcache::compiler {

struct NvrtcHeader {
  std::string name;  // matched by NVRTC against the #include spelling, exactly
  std::string content;
};

struct NvrtcInput {
  std::string source_name;  // what NVRTC names the source in its log
  std::string source;
  std::vector<NvrtcHeader> headers;  // handed to NVRTC in memory
  std::vector<std::string> options;  // complete, "-arch=..." included
  std::vector<std::string> name_expressions;
  bool want_cubin = true;  // else PTX
  bool want_ptx = false;   // a cubin's PTX too, in NvrtcOutput::ptx (lean images)
  // Folders the sealed NVRTC may also write (its precompiled headers).
  std::vector<std::string> writable_dirs;
  // An NVRTC program's compile (compiler/program.h): every answer NVRTC
  // gives is kept in NvrtcOutput::program (want_cubin and want_ptx are
  // ignored), and a source NVRTC rejects is a result there, not a throw.
  bool program = false;
  // NVRTC sees the real file system (issue 27; seal.h, SealPolicy::serve):
  // `headers` are the program's own, `options` its -I as written, and every
  // file it opens is served from a snapshot and listed in
  // NvrtcOutput::served. Relative names are taken from `working_dir`
  // (empty: this process's). Otherwise user headers are handed in memory and
  // NVRTC may read only the toolkit's folders.
  bool serve_disk = false;
  std::string working_dir;
  // Served: the working folder as NVRTC is to spell it (the requester's
  // working_folder_spelling()). A pool child runs NVRTC with $PWD set to it:
  // NVRTC writes $PWD's spelling into -lineinfo / -G outputs, and the
  // child's own $PWD is the folder it was started in.
  std::string pwd;
};

struct NvrtcOutput {
  std::string image;  // cubin bytes or PTX text (without a trailing NUL)
  std::string log;    // warnings, if any
  std::string ptx;    // with want_ptx: the PTX of the cubin (no trailing NUL)
  std::vector<cache::LoweredName> lowered_names;  // in the order of name_expressions
  double ms = 0;                                  // wall time of nvrtcCompileProgram
  // False where the kernel refused the seal (no Landlock, a seccomp filter
  // that forbids ours or unshare): NVRTC then could have read any file, so
  // the result is correct for this compile but must not be cached;
  // `unsealed_why` says what was refused.
  bool sealed = false;
  std::string unsealed_why;
  // Every path NVRTC named to the kernel while compiling (seal.h), and when
  // the compile started (CLOCK_REALTIME, ns): a file changed after that may
  // have been read half old, half new.
  std::vector<std::string> probes;
  int64_t started_ns = 0;
  // With NvrtcInput::serve_disk: every file NVRTC read, by the absolute name
  // it opened it by, with the hash of exactly the bytes it was served
  // (those paths are not repeated in `probes`).
  std::vector<ServedFile> served;
  // With NvrtcInput::serve_disk: which of those paths NVRTC named relative
  // to its working folder, and which by an absolute name (SealResult).
  std::vector<std::string> relative_names;
  std::vector<std::string> absolute_names;
  // With NvrtcInput::serve_disk: the names NVRTC was answered "no such file"
  // as the driver's JIT cache (SealPolicy::hidden_folders): keyed as that
  // (probes.h, ProbeContext::hidden), never by what is there.
  std::vector<std::string> hidden;
  // With NvrtcInput::program: the result code, log and every output as
  // NVRTC answered them (image, ptx and log are then left empty).
  std::optional<cache::ProgramRecord> program;
};

// The name NVRTC is handed for a source named `name`: unchanged where it is
// relative (the sealed working directory resolves nothing), else under a
// folder that does not exist. compile() maps it back in the log.
std::string sealed_source_name(const std::string& name);

class Nvrtc {
 public:
  // Loads the library at `path` once per process and resolves every symbol
  // kcache needs. Throws NotFound naming the library and dlerror() if it cannot
  // be loaded, or the missing symbol and the library if it is too old.
  static const Nvrtc& open(const std::string& path);

  const std::string& path() const { return path_; }
  // nvrtcVersion(), e.g. {13, 0}.
  std::pair<int, int> version() const;
  // nvrtcGetSupportedArchs(), e.g. {75, 80, 86, ..., 120}.
  std::vector<int> supported_archs() const;

  // Compiles one program. Throws CompileError carrying NVRTC's log exactly as
  // written and the options (not with NvrtcInput::program); Error for an NVRTC failure that is not a compile
  // error (out of memory, a bad option).
  NvrtcOutput compile(const NvrtcInput& input) const;

  struct Api;  // the function table, defined in nvrtc.cc

 private:
  explicit Nvrtc(std::string path);
  NvrtcOutput compile_here(const NvrtcInput& input) const;  // on the calling thread
  std::string path_;
  std::string loaded_path_;  // path_ with symbolic links resolved
  const Api* api_;
};

}  // namespace kcache::compiler
