#include "compiler/image/codegen.h"

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

TEST(CodegenTest, HeaderDeclaresEachKernelWithItsParameterSizes) {
  EmbedInfo info;
  info.symbol = "a::k_bundle";
  info.kernels = kernel_list(
      ".visible .entry saxpy(.param .f32 saxpy_param_0, .param .u64 saxpy_param_1)\n"
      ".visible .entry _Z5scaleIfEvPT_S0_i(.param .u64 p0, .param .f32 p1, .param .u32 p2)\n"
      ".visible .entry _Z4plusPf(.param .u64 q0)\n"
      ".visible .entry _Z4plusPd(.param .u64 r0)\n",
      {{"scale<float>", "_Z5scaleIfEvPT_S0_i"}});
  ASSERT_TRUE(info.kernels.known) << info.kernels.why;
  std::string h = generate_header(info);
  EXPECT_NE(h.find("namespace k_bundle_kernels {"), std::string::npos) << h;
  EXPECT_NE(h.find("inline constexpr entry_types::saxpy saxpy{};"), std::string::npos) << h;
  // A name expression names its kernel, as the runtime looks it up.
  EXPECT_NE(h.find("inline constexpr entry_types::scale_float scale_float{};"), std::string::npos);
  EXPECT_NE(h.find("return \"scale<float>\";"), std::string::npos) << h;
  // Overloads: the function's name, then _2.
  EXPECT_NE(h.find("entry_types::plus plus{};"), std::string::npos) << h;
  EXPECT_NE(h.find("entry_types::plus_2 plus_2{};"), std::string::npos) << h;
  EXPECT_NE(h.find("param_sizes[] = {4, 8};"), std::string::npos) << h;
  EXPECT_NE(h.find("parameter 0 (saxpy_param_0, .f32) is 4 bytes"), std::string::npos) << h;
}

// k(int n, float scale, float* p, S s, double d) as NVRTC declares it.
constexpr const char* kMixedPtx =
    ".visible .entry k(.param .u32 k_param_0, .param .f32 k_param_1, .param .u64 k_param_2,\n"
    "  .param .align 4 .b8 k_param_3[8], .param .f64 k_param_4, .param .b32 k_param_5)\n";

TEST(CodegenTest, HeaderChecksArgumentKindsWhereThePtxTypeRulesThemOut) {
  EmbedInfo info;
  info.symbol = "k_bundle";
  info.kernels = kernel_list(kMixedPtx, {});
  ASSERT_TRUE(info.kernels.known) << info.kernels.why;
  std::string h = generate_header(info);
  EXPECT_NE(h.find("#include <type_traits>"), std::string::npos) << h;
  // An int parameter: no floating-point argument, named by index and PTX name.
  EXPECT_NE(h.find("static_assert(sizeof(std::tuple_element_t<0, A>) != 4 || "
                   "!floating_point<std::tuple_element_t<0, A>>, \"kcache: kernel k, parameter 0 "
                   "(k_param_0, .u32) takes an integer (a 32-bit integer or enum): argument 1 is "
                   "a floating-point number"),
            std::string::npos)
      << h;
  // A float parameter: no integer, enum or pointer.
  EXPECT_NE(h.find("static_assert(sizeof(std::tuple_element_t<1, A>) != 4 || "
                   "!integer_or_pointer<std::tuple_element_t<1, A>>, \"kcache: kernel k, "
                   "parameter 1 (k_param_1, .f32) takes a floating-point number (a float): "
                   "argument 2 is an integer, an enum or a pointer"),
            std::string::npos)
      << h;
  EXPECT_NE(h.find("!floating_point<std::tuple_element_t<2, A>>"), std::string::npos) << h;
  EXPECT_NE(h.find("!integer_or_pointer<std::tuple_element_t<4, A>>"), std::string::npos) << h;
  // A struct's bytes and untyped bits: any value of their size.
  EXPECT_EQ(h.find("std::tuple_element_t<3, A>>"), std::string::npos) << h;
  EXPECT_EQ(h.find("std::tuple_element_t<5, A>>"), std::string::npos) << h;
  EXPECT_NE(h.find("param_types[] = {\".u32\", \".f32\", \".u64\", \".b8\", \".f64\", "
                   "\".b32\"};"),
            std::string::npos)
      << h;
  EXPECT_NE(h.find("//   3 k_param_3: .b8, 8 bytes: a struct, union or array\n"), std::string::npos)
      << h;
}

TEST(CodegenTest, AKernelNamedAsAKindTraitDoesNotClashWithIt) {
  EmbedInfo info;
  info.symbol = "k_bundle";
  info.kernels = kernel_list(".visible .entry floating_point(.param .f32 x)\n", {});
  std::string h = generate_header(info);
  EXPECT_NE(h.find("inline constexpr bool floating_point ="), std::string::npos) << h;
  EXPECT_NE(h.find("inline constexpr entry_types::floating_point_2 floating_point_2{};"),
            std::string::npos)
      << h;
  EXPECT_NE(h.find("return \"floating_point\";"), std::string::npos) << h;
}

TEST(CodegenTest, DescribesOnlyWhatThePtxTypeTells) {
  auto describe = [](const char* ptx) {
    return describe_param(
        ptx_entries(std::string(".entry k(") + ptx + ")").entries.at(0).params.at(0));
  };
  EXPECT_EQ(describe(".param .u32 a"), "a 32-bit integer or enum");
  EXPECT_EQ(describe(".param .s32 a"), "a 32-bit integer or enum");
  EXPECT_EQ(describe(".param .u64 a"), "a pointer or a 64-bit integer");
  EXPECT_EQ(describe(".param .u64 .ptr .global .align 4 a"), "a pointer");
  EXPECT_EQ(describe(".param .f32 a"), "a float");
  EXPECT_EQ(describe(".param .f64 a"), "a double");
  EXPECT_EQ(describe(".param .u8 a"), "a bool, char or 8-bit integer");
  EXPECT_EQ(describe(".param .b32 a"), "32 bits of any kind");
  EXPECT_EQ(describe(".param .align 8 .b8 a[24]"), "24 bytes: a struct, union or array");
}

TEST(CodegenTest, WithoutPtxTheHeaderSaysWhyItDeclaresNoKernels) {
  EmbedInfo info;
  info.symbol = "k_bundle";
  info.kernels = kernel_list("", {});
  EXPECT_FALSE(info.kernels.known);
  std::string h = generate_header(info);
  EXPECT_EQ(h.find("_kernels"), std::string::npos) << h;
  EXPECT_NE(h.find("no PTX"), std::string::npos) << h;
}

TEST(CodegenTest, KernelIdentifiers) {
  EXPECT_EQ(kernel_identifier({"saxpy", "", {}}), "saxpy");
  EXPECT_EQ(kernel_identifier({"_Z5scaleIfEvPT_S0_i", "scale<float>", {}}), "scale_float");
  EXPECT_EQ(kernel_identifier({"x", "ns::k<1, 2>", {}}), "ns_k_1_2");
  EXPECT_EQ(kernel_identifier({"_ZN2ns4kernEPf", "", {}}), "ns_kern");
  EXPECT_EQ(kernel_identifier({"_Z3big3Bigdc", "", {}}), "big");
  EXPECT_EQ(kernel_identifier({"_Z99bad", "", {}}), "Z99bad");
  EXPECT_EQ(kernel_identifier({"$1", "", {}}), "kernel_1");
}

}  // namespace
}  // namespace kcache::compiler
