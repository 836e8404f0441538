#include "compiler/codegen.h"

#include <gtest/gtest.h>

#include "common/error.h"

namespace kcache::compiler {
namespace {

TEST(CodegenTest, EscapesSoNoCompilerCanMisreadTheBytes) {
  EXPECT_EQ(escape_for_literal("plain text 123"), "plain text 123");
  EXPECT_EQ(escape_for_literal("\"\\?"), "\\\"\\\\\\?");  // no trigraph can form
  // Always three octal digits, so a following digit is not swallowed.
  EXPECT_EQ(escape_for_literal(std::string("\0"
                                           "1",
                                           2)),
            "\\0001");
  EXPECT_EQ(escape_for_literal("\n\x7f\xff"), "\\012\\177\\377");
}

TEST(CodegenTest, SymbolsAreIdentifiersJoinedByColons) {
  EXPECT_NO_THROW(check_symbol("saxpy_bundle"));
  EXPECT_NO_THROW(check_symbol("my::ns::saxpy_bundle2"));
  for (const char* bad : {"", "2fast", "a-b", "a::", "::a", "a:::b", "a b", "ns::"}) {
    EXPECT_THROW(check_symbol(bad), InvalidArgument) << bad;
  }
}

TEST(CodegenTest, HeaderDeclaresTheAccessorInItsNamespaces) {
  EmbedInfo info;
  info.symbol = "a::b::saxpy_bundle";
  info.source_name = "kernels/saxpy.cu";
  info.archs = {"sm_80", "compute_90"};
  std::string h = generate_header(info);
  EXPECT_NE(h.find("#include \"bundle/embedded.h\""), std::string::npos);
  EXPECT_NE(h.find("namespace a {\nnamespace b {\n"), std::string::npos) << h;
  EXPECT_NE(h.find("const kcache::bundle::EmbeddedBundle& saxpy_bundle();"), std::string::npos)
      << h;
  EXPECT_NE(h.find("from kernels/saxpy.cu for sm_80 compute_90"), std::string::npos) << h;
}

TEST(CodegenTest, SourceDependsOnlyOnTheEmbeddedRegistry) {
  EmbedInfo info;
  info.symbol = "k";
  info.source_name = "k.cu";
  std::string cc = generate_source("bytes", info);
  size_t includes = 0;
  for (size_t at = cc.find("#include"); at != std::string::npos; at = cc.find("#include", at + 1)) {
    ++includes;
  }
  EXPECT_EQ(includes, 2u) << cc;  // <cstddef> and "bundle/embedded.h"
  EXPECT_NE(cc.find("alignas(16) const unsigned char kBundle[5 + 1] =\n\"bytes\";"),
            std::string::npos)
      << cc;
  EXPECT_NE(cc.find("register_embedded(kEmbedded)"), std::string::npos);
}

}  // namespace
}  // namespace kcache::compiler
