// The .entry reader (compiler/image/ptx_entries.h) on NVRTC's forms and its bounds.
#include "compiler/image/ptx_entries.h"

#include <gtest/gtest.h>

#include <string>

namespace kcache::compiler {
namespace {

std::vector<size_t> sizes(const PtxEntry& e) {
  std::vector<size_t> out;
  for (const PtxParam& p : e.params) out.push_back(p.size);
  return out;
}

TEST(PtxEntriesTest, ReadsNvrtcsEntryDeclarations) {
  PtxEntries r = ptx_entries(R"(
.version 8.0
.target sm_80
.address_size 64
	// .globl	saxpy
.visible .entry saxpy(
	.param .f32 saxpy_param_0,
	.param .u64 .ptr .global .align 1 saxpy_param_1,
	.param .u64 saxpy_param_2,
	.param .u32 saxpy_param_3
)
{
	.reg .b32 %r<5>;
	ret;
}
	// .globl	_Z3big3Bigdc
.visible .entry _Z3big3Bigdc(
	.param .align 4 .b8 _Z3big3Bigdc_param_0[12],
	.param .f64 _Z3big3Bigdc_param_1,
	.param .u8 _Z3big3Bigdc_param_2
)
{
	ret;
}
.visible .entry none()
{
	ret;
}
)");
  ASSERT_TRUE(r.ok) << r.why;
  ASSERT_EQ(r.entries.size(), 3u);
  EXPECT_EQ(r.entries[0].name, "saxpy");
  EXPECT_EQ(sizes(r.entries[0]), (std::vector<size_t>{4, 8, 8, 4}));
  EXPECT_EQ(r.entries[0].params[1].name, "saxpy_param_1");
  EXPECT_EQ(r.entries[0].params[1].align, 1u) << ".align after .ptr .global";
  EXPECT_EQ(r.entries[1].name, "_Z3big3Bigdc");
  EXPECT_EQ(sizes(r.entries[1]), (std::vector<size_t>{12, 8, 1}));
  EXPECT_EQ(r.entries[1].params[0].type, ".b8");
  EXPECT_EQ(r.entries[1].params[0].align, 4u);
  EXPECT_TRUE(r.entries[2].params.empty());
}

TEST(PtxEntriesTest, CommentsFunctionsAndStringsAreNotEntries) {
  PtxEntries r = ptx_entries(
      "// .entry fake(.param .u32 x)\n/* .entry fake2() */\n.func f(.param .b32 p) { ret; }\n"
      ".global .b8 s[9] = {46,101,110,116,114,121,0}; // \".entry\"\n"
      ".visible .entry real(.param .b64 /* inline */ real_param_0) { ret; }\n");
  ASSERT_TRUE(r.ok) << r.why;
  ASSERT_EQ(r.entries.size(), 1u);
  EXPECT_EQ(r.entries[0].name, "real");
  EXPECT_EQ(sizes(r.entries[0]), (std::vector<size_t>{8}));
}

TEST(PtxEntriesTest, WhatItDoesNotUnderstandIsAFailureWithAReason) {
  for (const char* bad : {
           ".entry (.param .u32 x)",                       // no name
           ".entry k(.param .u32 a .param .u32 b)",        // no comma
           ".entry k(.param .u32)",                        // no parameter name
           ".entry k(.param .v4 .u32 a)",                  // a vector parameter
           ".entry k(.param .b8 a[0])",                    // an empty array
           ".entry k(.param .b8 a[40000])",                // over the parameter bound
           ".entry k(.param .b8 a[99999999999999999999])",  // not a number it takes
           ".entry k(.param .align 0 .b8 a[4])",           // a zero alignment
           ".entry k(.param .u32 a",                       // not closed
       }) {
    PtxEntries r = ptx_entries(bad);
    EXPECT_FALSE(r.ok) << bad;
    EXPECT_FALSE(r.why.empty()) << bad;
    EXPECT_TRUE(r.entries.empty()) << bad;
  }
}

TEST(PtxEntriesTest, ParamKindsAreOnlyWhatThePtxTypeTells) {
  PtxEntries r = ptx_entries(
      ".visible .entry k(.param .u32 n, .param .f32 s, .param .u64 p, .param .u64 .ptr .global "
      ".align 8 q, .param .f64 d, .param .s16 h, .param .b32 bits, .param .align 4 .b8 st[8], "
      ".param .u32 arr[2], .param .f16 hf, .param .bf16x2 bf)");
  ASSERT_TRUE(r.ok) << r.why;
  const std::vector<PtxParam>& p = r.entries[0].params;
  ASSERT_EQ(p.size(), 11u);
  EXPECT_EQ(ptx_param_kind(p[0]), ParamKind::integer);  // int, unsigned, an enum
  EXPECT_EQ(ptx_param_kind(p[1]), ParamKind::floating);
  EXPECT_EQ(ptx_param_kind(p[2]), ParamKind::integer);  // a pointer or a 64-bit integer
  EXPECT_FALSE(p[2].pointer) << "NVRTC's .u64 says nothing of a pointer";
  EXPECT_EQ(ptx_param_kind(p[3]), ParamKind::integer);  // a CUdeviceptr is an integer too
  EXPECT_TRUE(p[3].pointer);
  EXPECT_EQ(p[3].align, 8u);
  EXPECT_EQ(ptx_param_kind(p[4]), ParamKind::floating);
  EXPECT_EQ(ptx_param_kind(p[5]), ParamKind::integer);
  EXPECT_EQ(ptx_param_kind(p[6]), ParamKind::bits) << ".b32: untyped bits, a float or an int";
  EXPECT_EQ(ptx_param_kind(p[7]), ParamKind::bits) << "a struct's .b8 array";
  EXPECT_EQ(ptx_param_kind(p[8]), ParamKind::bits) << "an array of any type";
  EXPECT_EQ(ptx_param_kind(p[9]), ParamKind::floating);
  EXPECT_EQ(ptx_param_kind(p[10]), ParamKind::floating);
}

TEST(PtxEntriesTest, TypeSizes) {
  EXPECT_EQ(ptx_type_size(".u8"), 1u);
  EXPECT_EQ(ptx_type_size(".f16"), 2u);
  EXPECT_EQ(ptx_type_size(".f32"), 4u);
  EXPECT_EQ(ptx_type_size(".s64"), 8u);
  EXPECT_EQ(ptx_type_size(".b128"), 16u);
  EXPECT_EQ(ptx_type_size(".ptr"), 0u);
}

}  // namespace
}  // namespace kcache::compiler
