// The bytes embed_sample_gen writes into generated C++ and embedded_test
// expects to read back: every byte value, escapes followed by digits, and
// would-be trigraphs, inside a real bundle (so images must come out aligned).
#pragma once

#include <string>

#include "bundle/bundle.h"

namespace kcache::compiler::testing {

inline std::string tricky_bytes() {
  std::string s;
  for (int i = 0; i < 512; ++i) s += static_cast<char>(i & 0xff);
  s += std::string(
      "\0"
      "1"
      "\377"
      "7"
      "\1"
      "8",
      6);
  for (char c : std::string("=/'()!<>-")) s += std::string(2, '?') + c;  // trigraphs, if read so
  s += "\"\\\n\r\t";
  return s;
}

inline std::string sample_bundle() {
  static const std::string cubin =
      "\x7f"
      "ELF" +
      tricky_bytes();
  static const std::string ptx =
      "// ptx ?"
      "?= \"quoted\"\n.version 9.0\n";
  bundle::Bundle b;
  b.source_name = "tests/compiler/kernels/\"odd\" name.cu";
  b.compiler_identity = "test identity";
  b.images.push_back(
      {bundle::ImageKind::cubin, "sm_90", "00112233445566778899aabbccddeeff", cubin});
  b.images.push_back(
      {bundle::ImageKind::ptx, "compute_90", "ffeeddccbbaa99887766554433221100", ptx});
  b.lowered_names.push_back({"scale<float>", "_Z5scaleIfEvPT_S0_i"});
  return bundle::serialize(b);
}

}  // namespace kcache::compiler::testing
