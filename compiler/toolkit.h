// The CUDA toolkit the precompiler compiles with, and the compiler identity
// that goes into every cache key.
//
// The identity is computed without loading NVRTC: a hit must not pay for
// dlopen-ing a 109 MB library (a hit process has 5 ms in all). It is made of
//   - the toolkit version (CUDA_VERSION from <cuda>/include/cuda.h) and the
//     CCCL version (CCCL_VERSION), which stand for the toolkit headers NVRTC
//     reads itself (cuda_fp16.h, cooperative_groups, CUB, ...), and
//   - a fingerprint of libnvrtc and libnvrtc-builtins: the file size, the GNU
//     build-id when the ELF has one, and XXH3-64 of the first and last 64 KiB.
// find_toolkit() costs ~0.1 ms in all (less where toolkit_memo.h remembers
// it); hashing all of libnvrtc would cost ~80 ms per run (bench/compile_bench,
// page cache warm).
// The trade-off (ccache's compiler_check): a rebuilt NVRTC of the same size
// whose change lies only in the unread middle, with the same build-id, would
// share keys with the old one. A release changes the build-id and (in
// practice) the size; content-based, so machines with the same toolkit in
// different places or installed at different times share keys. Edited toolkit
// headers are not seen: they are keyed by version only.
#pragma once

#include <string>
#include <vector>

namespace kcache::compiler {

struct LibraryFingerprint {
  std::string path;  // the file fingerprinted (and, for libnvrtc, loaded)
  std::string name;  // file name, e.g. "libnvrtc.so.13"
  uint64_t size = 0;
  std::string build_id;        // hex GNU build-id, empty if none
  std::string head_tail_xxh3;  // 16 hex digits

  // "libnvrtc.so.13 size=109338064 build-id=65be0d... xxh3=0123..."
  std::string describe() const;
};

struct Toolkit {
  std::string root;                       // as found, e.g. "/usr/local/cuda"
  std::vector<std::string> include_dirs;  // <root>/include and <root>/include/cccl, if present
  int cuda_version = 0;                   // CUDA_VERSION, e.g. 13000
  int cccl_version = 0;                   // CCCL_VERSION, e.g. 3000001 (0 if no CCCL)
  LibraryFingerprint nvrtc;
  LibraryFingerprint nvrtc_builtins;
  // libnvJitLink next to libnvrtc; path empty if there is none. Not part of
  // identity(): it is keyed only where it makes the image (CompileRequest's
  // image_pass), so NVRTC's own images keep their keys.
  LibraryFingerprint nvjitlink;

  // "13.0"
  std::string version_string() const;
  // The compiler identity that enters every key, one readable line.
  std::string identity() const;
};

// Finds the toolkit: `cuda_path` (the --cuda-path flag) if not empty, else
// $CUDA_PATH, else /usr/local/cuda. Throws NotFound naming every place it
// looked and why each was rejected. Cheap: no NVRTC is loaded. With a
// `store_dir` (the local store's folder), what it reads of the toolkit's files
// is remembered there by their stats (toolkit_memo.h): a hit reads none.
Toolkit find_toolkit(const std::string& cuda_path, const std::string& store_dir = "");

// Fingerprints one library file. Throws IoError if it cannot be read.
LibraryFingerprint fingerprint_library(const std::string& path);

}  // namespace kcache::compiler
