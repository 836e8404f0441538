// Fuzzes compiler/image/ptx_entries.h (the .entry reader `kcache bundle` runs on
// untrusted bundles and codegen on NVRTC's PTX). Beyond "no crash", checks
// what it promises: within its bounds; every name an identifier found in the
// input; every size its type's times a count, within kMaxEntryParamBytes; a
// failure carries a reason and no entries; the answer is deterministic; and
// the generated header's text for them stays one declaration per kernel.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "compiler/image/codegen.h"
#include "compiler/image/ptx_entries.h"

namespace {

void check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "ptx_entries_fuzzer: broken promise: %s\n", what);
    std::abort();
  }
}

bool identifier(const std::string& s) {
  if (s.empty() || s.size() > kcache::compiler::kMaxEntryNameBytes) return false;
  for (char c : s) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '$' || c == '%';
    if (!ok) return false;
  }
  return !(s[0] >= '0' && s[0] <= '9');
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kcache::compiler;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  PtxEntries a = ptx_entries(text);
  PtxEntries b = ptx_entries(text);
  check(a.ok == b.ok && a.why == b.why && a.entries.size() == b.entries.size(), "deterministic");
  if (!a.ok) {
    check(!a.why.empty() && a.entries.empty(), "a failure says why and lists nothing");
    return 0;
  }
  check(a.entries.size() <= kMaxEntries, "entries bounded");
  for (const PtxEntry& e : a.entries) {
    check(identifier(e.name), "an entry's name is an identifier");
    check(text.find(e.name) != std::string_view::npos, "an entry's name is in the input");
    check(e.params.size() <= kMaxEntryParams, "parameters bounded");
    for (const PtxParam& p : e.params) {
      check(identifier(p.name), "a parameter's name is an identifier");
      const size_t unit = ptx_type_size(p.type);
      check(unit != 0, "a parameter's type is a known one");
      check(p.size != 0 && p.size % unit == 0 && p.size <= kMaxEntryParamBytes, "size");
      check(p.align != 0, "alignment");
      check(ptx_param_kind(p) == ParamKind::bits || p.size == unit,
            "an integer or floating kind only for one scalar, never an array");
    }
  }
  // The header declares each kernel once (names made unique).
  if (text.empty()) return 0;  // no PTX: kernel_list says none are known
  EmbedInfo info;
  info.symbol = "fuzz_bundle";
  info.kernels = kernel_list(text, {});
  check(info.kernels.known, "kernel_list agrees with ptx_entries");
  const std::string header = generate_header(info);
  size_t structs = 0;
  for (size_t at = header.find("\nstruct "); at != std::string::npos;
       at = header.find("\nstruct ", at + 1)) {
    ++structs;
  }
  check(structs == a.entries.size(), "one type per kernel");
  return 0;
}
