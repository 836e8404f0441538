// The kernels of a cubin, from its ELF symbol table: for `kcache ls`, which
// lists what an entry holds without the PTX a cubin entry does not keep.
//
// A cubin is an ELF64 file; each kernel is a function symbol that the CUDA
// toolchain marks as an entry point (STO_CUDA_ENTRY in st_other). Entries
// arrive from remotes and archives, so the reader is bounded: every offset,
// size and name is checked against the bytes, and anything that is not a
// well-formed little-endian ELF64 file gives an empty list, never a throw or
// a read past the end.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace kcache::compiler {

// At most this many names, each at most kMaxEntryNameBytes (ptx_entries.h).
constexpr size_t kMaxCubinKernels = 65536;

// The kernels' names (mangled, as in the image) in symbol-table order;
// empty for bytes that are no cubin.
std::vector<std::string> cubin_kernels(std::string_view cubin);

}  // namespace kcache::compiler
