// kcache_jit: compile on a miss at run time, through the store.
//
// For kernels specialised at run time (macros, template arguments, tile sizes
// only known then) and for GPUs newer than the images a program ships. A JIT
// compile is a precompiler compile (compiler/compiler.h) of one target,
// served as every compile is: NVRTC reads the disk itself through
// the seal and the key covers every byte it read; the store is asked first
// (local, then remote), and NVRTC is loaded and run only on a miss, whose
// image is stored.
//
// Where NVRTC works: in the source's folder (the folder of Source::path; with
// `text` and no `path`, this process's working folder), which is keyed only
// where an option writes it into the output (-G, -lineinfo). Headers beneath
// it are keyed relative to it, so the same source tree in another folder (a
// checkout, an installed copy) hits. NVRTC searches quoted includes next to
// its program's name, so the name it is given is chosen to put that folder
// where the file is: Source::name as given where the path's folder ends with
// the name's folder ("/src/mylib/scale.cu" named "mylib/scale.cu": NVRTC works
// in /src), else the name's last part ("scale.cu") in the path's folder. With
// `text` and no `path`, quoted includes are searched next to the name in the
// working folder, as NVRTC alone would. NVRTC's messages and __FILE__ name
// the source by that name.
//
// The seal runs NVRTC on a thread of its own and its supervisor on another,
// both ended before compile() returns: no seccomp filter or no_new_privs is
// left on the caller's threads. The first process to need a specialisation pays the compile; every
// later one, on this machine or on any sharing the remote, gets a store hit.
//
// Target: a cubin for the device's arch ("sm_90" on a 9.0 device). If this
// NVRTC does not know that arch (a GPU newer than the toolkit), PTX for the
// highest virtual arch it supports below it, which the driver JIT-compiles.
//
// Storage: settings are resolved as the kcache CLI resolves them
// ($KCACHE_DIR, $KCACHE_REMOTE..., kcache.conf; see cache/config.h), except
// that a bad setting never fails the program: it falls back to the default
// local store with one warning. Cache trouble (full disk, remote down) is a
// warning and a compile, never an error (cache::Storage's contract).
//
// This is the optional target //runtime/jit (alias //runtime/jit:kcache_jit).
// It links the precompiler and the store (SQLite); NVRTC is opened with dlopen
// on the first miss, libcurl and libcrypto on first use of a remote. The core
// //runtime links none of this.
//
// Errors: CompileError carrying NVRTC's log and the options for a source that
// does not compile; InvalidArgument for a bad option or arch; NotFound for a
// missing toolkit or source file; DriverError from loading (as Module).
//
// Thread safety: a Jit may be used from any number of threads at once; NVRTC
// runs one compile at a time per process (compiler.h).
#pragma once

#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "bundle/bundle.h"
#include "cache/format/entry.h"
#include "cache/storage.h"
#include "compiler/compiler.h"
#include "compiler/toolkit.h"
#include "runtime/module.h"

namespace kcache::runtime::jit {

// One kernel source and how to specialise it.
struct Source {
  // What NVRTC names the source in its messages, and what the key hashes:
  // keep it the same on every machine ("mylib/scale.cu", not an absolute
  // path). Empty: `path`.
  std::string name;
  // The source itself. Empty: it is read from `path`.
  std::string text;
  // A file to read the source from when `text` is empty. Quoted includes are
  // looked up next to it first (with `text` and no `path`, next to `name` in
  // the working directory), then in include_dirs. Its folder is where NVRTC
  // works (above).
  std::string path;
  // -I, searched by NVRTC; a relative one is taken from this process's
  // working folder (passed to NVRTC by its absolute name).
  std::vector<std::string> include_dirs;
  std::vector<std::string> defines;       // NAME or NAME=VALUE
  // Template instances to look up by name ("reduce<float, 256>"); Module
  // finds them through the lowered names the entry carries.
  std::vector<std::string> name_expressions;
  std::string std = "c++17";
  std::vector<std::string> nvrtc_options;  // e.g. "-lineinfo"
};

struct Options {
  // The toolkit (NVRTC and its headers). Empty: $CUDA_PATH, else /usr/local/cuda.
  std::string cuda_path;
  // The arch to compile for: "sm_90" (a cubin, or PTX where this NVRTC does not
  // know sm_90) or "compute_90" (PTX). Empty: the arch of the device of the
  // calling thread's current context, which needs the driver.
  std::string arch;
  // nullopt: cache::storage_options_or_local_only() (the CLI's settings).
  std::optional<cache::StorageOptions> storage;
  // Lean images (compiler/image/lean_image.h): unreferenced variables no host can name removed,
  // the cubin assembled with nvJitLink. False: NVRTC's bytes exactly.
  bool lean = true;
};

struct Compiled {
  cache::Entry entry;  // the image (cubin or PTX), its arch and lowered names
  bool hit = false;    // from the store: NVRTC not run
  // NVRTC does not know the device's arch: the entry is PTX for the highest
  // virtual arch it supports below it.
  bool ptx_fallback = false;
  std::string warnings;  // NVRTC's log on a miss, if not empty
};

class Jit {
 public:
  // Finds the toolkit (cheap: NVRTC is not loaded) and opens the storage.
  // Throws NotFound if there is no toolkit, naming where it looked.
  explicit Jit(Options options = {});
  ~Jit();
  Jit(const Jit&) = delete;
  Jit& operator=(const Jit&) = delete;

  // The image for Options::arch (or the current device), from the store or
  // compiled now and stored. Needs no driver when Options::arch is given.
  Compiled compile(const Source& source);

  // compile(), then Module::load_image into the current context. The Module
  // is named "<source name> (JIT sm_90, store hit)" or "(..., compiled)".
  Module load(const Source& source);

  cache::Storage& storage() { return *storage_; }
  const compiler::Toolkit& toolkit() const { return compiler_->toolkit(); }

 private:
  Compiled compile_target(const Source& source, const std::string& cubin_arch,
                          const std::string& ptx_arch);

  Options options_;
  std::unique_ptr<cache::Storage> storage_;
  std::unique_ptr<compiler::Compiler> compiler_;
  std::mutex mutex_;                // guards no_cubin_
  std::set<std::string> no_cubin_;  // real archs this NVRTC turned down
};

// A process-wide Jit with default Options, made on first use (a failure is
// thrown to the caller and retried on the next call). Thread-safe.
Jit& default_jit();

// The bundle's image for the current device if it has one (as Module::load),
// else jit->load(fallback): for programs that ship images for the GPUs they
// know and the source for the others. `jit` nullptr: default_jit(), made only
// when needed (a machine without a toolkit loads the bundle's images fine).
Module load_or_compile(const bundle::Bundle& bundle, const std::string& what,
                       const Source& fallback, Jit* jit = nullptr);

// load_or_compile for the bundle embedded under `symbol` (bundle/embedded.h).
// Each call loads a new Module: keep it. NotFound if no bundle is registered
// under `symbol`.
Module load_embedded_or_compile(std::string_view symbol, const Source& fallback,
                                Jit* jit = nullptr);

}  // namespace kcache::runtime::jit
