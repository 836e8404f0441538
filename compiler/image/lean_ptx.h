// The lean pass: removes from NVRTC's PTX the module-scope internal variables
// (`.global` without `.visible`/`.extern`/`.weak`/`.common`) that nothing kept
// references and no host can name (docs/LEAN.md). NVRTC emits every static
// constexpr data member and constexpr variable template that CCCL, CuTe or
// CUTLASS instantiate as such a variable and ptxas keeps them all: a CUB
// kernel's cubin carries ~1,000 ELF symbols it never uses, a CuTe GEMM's
// ~2,600, and the driver pays for each at load time (docs/PERFORMANCE.md).
//
// A pure function of text: no CUDA, no I/O; fuzzed by fuzz/lean_ptx_fuzzer.cc.
//
// Contract: the result is either the input unchanged (`changed` false, `why`
// saying why when the input was not understood) or the input with whole
// top-level variable declarations cut out, every one of them
//   - internal: `.global` with no linkage directive, of a plain scalar or
//     vector type (never .const, .shared, .tex, .surfref, .samplerref, and never
//     one with an .attribute such as .managed),
//   - named so that only nvrtcGetLoweredName can name it (mangled_name.h:
//     template instances such as `cute::C<1>::value`, internal linkage,
//     reserved or versioned names such as `cuda::std::__4::...`), or, with
//     `classes`, a class's constant static data member read from the program's
//     text (`cutlass::MatrixCoord::kRow`, class_constants.h): a host can ask
//     cuModuleGetGlobal for any other variable by a name it knows, so a
//     user's `__device__ int x;`, also in `namespace cuda`, stays,
//   - not in `keep` (the lowered names of name expressions), and
//   - named by no identifier of any kept declaration, function body or kept
//     initializer (to a fixpoint).
// Anything the parser does not recognise leaves the PTX unchanged.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "compiler/image/class_constants.h"

namespace kcache::compiler {

struct LeanPtx {
  std::string ptx;  // the lean PTX (the input itself when !changed)
  bool changed = false;
  std::string why;  // when !changed and the input was not understood: what was not
  size_t bytes_removed = 0;
  size_t variables_removed = 0;
  size_t variables_kept = 0;         // module-scope variables left (any kind)
  // Of those, internal .global ones a host can name, kept as such whether
  // referenced or not (with `classes`, the class constants among them went):
  // zero means the program's text has nothing to decide.
  size_t host_nameable_kept = 0;
  std::vector<std::string> removed;  // the names of the variables removed
};

// Bounds: inputs over kMaxPtxBytes, tokens over kMaxTokenBytes, braces or
// parentheses nested deeper than kMaxNesting, more than kMaxStatements
// top-level statements: unchanged, with `why`.
constexpr size_t kMaxPtxBytes = size_t{256} << 20;
constexpr size_t kMaxTokenBytes = 64 << 10;
constexpr int kMaxNesting = 256;
constexpr size_t kMaxStatements = 4 << 20;

// `classes`: the program's text read for class constants; null: none removed.
LeanPtx lean_ptx(std::string_view ptx, const std::vector<std::string>& keep,
                 const ClassConstants* classes = nullptr);

}  // namespace kcache::compiler
