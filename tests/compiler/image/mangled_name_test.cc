// Which variables a host can name (compiler/image/mangled_name.h), on names NVRTC
// really emits (CCCL 3.0, CuTe/CUTLASS 4.2) and on hand-made ones: the lean
// pass removes only lowered_name_only variables, so a wrong by_name costs
// bytes and a wrong lowered_name_only breaks cuModuleGetGlobal.
#include "compiler/image/mangled_name.h"

#include <gtest/gtest.h>

#include <string>

namespace kcache::compiler {
namespace {

void expect_reach(const std::string& name, HostReach reach, const std::string& why) {
  NameReach r = host_reach(name);
  EXPECT_EQ(r.reach, reach) << name << ": " << r.why;
  if (!why.empty()) {
    EXPECT_EQ(std::string(r.why), why) << name;
  }
}

TEST(MangledNameTest, UserVariablesInLibraryNamespacesCanBeNamedByAHost) {
  // namespace cuda { namespace my { __device__ int knob; } }: the unsound case.
  expect_reach("_ZN4cuda2my4knobE", HostReach::by_name, "external linkage");
  // namespace cub { __device__ int knob; }
  expect_reach("_ZN3cub4knobE", HostReach::by_name, "external linkage");
  expect_reach("_ZN6thrust5countE", HostReach::by_name, "external linkage");
  expect_reach("_ZN4cute7counterE", HostReach::by_name, "external linkage");
}

TEST(MangledNameTest, PlainExternalVariablesCanBeNamedByAHost) {
  expect_reach("_ZN2ns5countE", HostReach::by_name, "external linkage");
  expect_reach("_ZN1a1b1c1dE", HostReach::by_name, "external linkage");
  expect_reach("_ZSt4cout", HostReach::by_name, "external linkage");
  // Static data members of non-template classes: a host can spell those too.
  expect_reach("_ZN7cutlass9uint128_t13storage_bits_E", HostReach::by_name, "external linkage");
  expect_reach("_ZN4cute4TMEM12Allocator1Sm25ColumnsPerAllocationSliceE", HostReach::by_name,
               "external linkage");
}

TEST(MangledNameTest, ExternCAndGlobalNamespaceNamesCanBeNamedByAHost) {
  expect_reach("counter", HostReach::by_name, "unmangled");  // extern "C" or ::counter
  expect_reach("kThreads", HostReach::by_name, "unmangled");
  expect_reach("x", HostReach::by_name, "unmangled");
  expect_reach("my_table_2", HostReach::by_name, "unmangled");
}

TEST(MangledNameTest, StaticMembersOfClassTemplateSpecializationsAreLoweredNameOnly) {
  expect_reach("_ZN4cute1CILi1EE5valueE", HostReach::lowered_name_only, "template instance");
  expect_reach("_ZN4cute1CILin1EE5valueE", HostReach::lowered_name_only, "template instance");
  expect_reach("_ZN4cuda3std3__417integral_constantIbLb1EE5valueE", HostReach::lowered_name_only,
               "template instance");
  expect_reach("_ZN4cuda3std3__417integral_constantImLm0EE5valueE", HostReach::lowered_name_only,
               "template instance");
  expect_reach("_ZN4cuda3std3__411__type_listIJasilxEE6__sizeE", HostReach::lowered_name_only,
               "template instance");
  expect_reach("_ZN4cute6LayoutINS_1CILi2EEEiE4rankE", HostReach::lowered_name_only,
               "template instance");
}

TEST(MangledNameTest, NestedTemplatesAreLoweredNameOnly) {
  // Real CuTe names: packs, substitutions, pointers to const, nested tuples.
  expect_reach(
      "_ZN4cute6TensorINS_10ViewEngineINS_8gmem_ptrIPKN7cutlass6half_tEEEEENS_6LayoutINS_"
      "5tupleIJNSA_"
      "IJNSA_IJNS_1CILi4EEENSB_ILi8EEEEEENSA_IJNSB_ILi2EEENSB_ILi1EEEEEEEEENSA_IJNSA_IJSF_SF_SF_"
      "EEENSA_"
      "IJSG_SG_iEEEEEEEEENSA_IJNSA_IJNSA_IJSF_iEEENSA_IJiNSB_ILi0EEEEEEEEENSA_IJNSA_IJSG_iSD_"
      "EEENSA_"
      "IJSO_SO_NSB_ILi16EEEEEEEEEEEEEEE4rankE",
      HostReach::lowered_name_only, "template instance");
  // A member of a class nested in a template: A<int>::B::x.
  expect_reach("_ZN2ns1AIiE1B1xE", HostReach::lowered_name_only, "template instance");
  // Template arguments of many kinds: arrays, functions, member pointers,
  // references, nullptr, a float, a closure type, a template parameter.
  expect_reach("_ZN2ns1AIA4_iFvRKiOdEM1SFivELDnELf3f800000ENS_UlvE_ET_E1xE",
               HostReach::lowered_name_only, "template instance");
}

TEST(MangledNameTest, VariableTemplateInstancesAreLoweredNameOnly) {
  expect_reach("_ZN2ns1vIiEE", HostReach::lowered_name_only, "template instance");
  expect_reach("_Z1vIiE", HostReach::lowered_name_only, "template instance");
  expect_reach("_ZN4cuda3std3__49is_same_vIiiEE", HostReach::lowered_name_only,
               "template instance");
}

TEST(MangledNameTest, InternalLinkageIsLoweredNameOnly) {
  expect_reach("_ZL5local", HostReach::lowered_name_only, "internal linkage");
  expect_reach("_ZN2nsL5localE", HostReach::lowered_name_only, "internal linkage");
  // GCC's anonymous namespace, NVRTC's per-file one.
  expect_reach("_ZN12_GLOBAL__N_13anyE", HostReach::lowered_name_only, "internal linkage");
  expect_reach("_ZN34_INTERNAL_00000000_4_k_cu_efc770de4cuda3std3__45__cpo5beginE",
               HostReach::lowered_name_only, "internal linkage");
  expect_reach(
      "_ZN43_INTERNAL_00000000_12_cute_gemm_cu_b74555b84cuda3std3__413__find_detail11__"
      "ambiguousE",
      HostReach::lowered_name_only, "internal linkage");
  // A user's own variable in an anonymous namespace: only a name expression reaches it.
  expect_reach("_ZN34_INTERNAL_00000000_4_k_cu_efc770de5knob2E", HostReach::lowered_name_only,
               "internal linkage");
}

TEST(MangledNameTest, ReservedAndVersionedNamesAreLoweredNameOnly) {
  expect_reach("_ZN4cuda3std3__48in_placeE", HostReach::lowered_name_only, "reserved name");
  expect_reach("_ZN2ns7_Hidden1xE", HostReach::lowered_name_only, "reserved name");
  expect_reach("__cudart_i2opi_f", HostReach::lowered_name_only, "reserved name");
  expect_reach("_Table", HostReach::lowered_name_only, "reserved name");
  expect_reach("_ZN3cub17CUB_300001_SM_9006detail11max_devicesE", HostReach::lowered_name_only,
               "versioned library namespace");
  expect_reach("_ZN3cub24CUB_300001_SM_800_900_NS11max_devicesE", HostReach::lowered_name_only,
               "versioned library namespace");
  expect_reach("_ZN6thrust23THRUST_300001_SM_900_NS6detail1xE", HostReach::lowered_name_only,
               "versioned library namespace");
  // Look-alikes are a user's names.
  expect_reach("_ZN3cub7CUB_FOO1xE", HostReach::by_name, "external linkage");
  expect_reach("_ZN3cub7CUB_1231xE", HostReach::by_name, "external linkage");
  expect_reach("_ZN2ns6_lowerE", HostReach::by_name, "external linkage");
}

TEST(MangledNameTest, WhatTheParserDoesNotUnderstandIsKept) {
  for (std::string name : {
           "_ZZ4mainE1x",               // a local static
           "_ZN2ns1xB5cxx11E",          // an ABI tag
           "_ZN2ns1AIXadL_Z1fvEEE1xE",  // an expression argument
           "_ZN2ns1AIL_Z1fvEE1xE",      // an entity argument
           "_ZNK2ns1xE",                // a cv-qualified nested name (a member function)
           "_ZNS_1xE",                  // a substitution with nothing to refer to
           "_ZN2ns9cvE",                // malformed: the length runs past the name
           "_ZN2ns",                    // truncated
           "_ZN2nsE1x",                 // characters after the name
           "_ZNE",                      // empty
           "_ZN0E",                     // a zero length
           "_ZN2n$E",                   // not a C++ identifier
           "_Z",                        // nothing
           "_ZN2ns1AIDxE1xE",           // a type the parser does not know
           "_ZStUlvE_",                 // a closure type as the name (found by the fuzzer)
           "_ZN2nsUt_E",                // an unnamed type as the name
           "$str",                      // PTX-only names
           "%r1",
           "",
       }) {
    expect_reach(name, HostReach::not_understood, "");
  }
}

TEST(MangledNameTest, NamesOverTheBoundsAreKept) {
  std::string deep = "_ZN2ns1AI";
  for (int i = 0; i < 10000; ++i) deep += 'P';
  deep += "iEE1xE";
  expect_reach(deep, HostReach::not_understood, "nesting over the bound");

  std::string nested_args = "_ZN2ns1AI";
  for (int i = 0; i < 1000; ++i) nested_args += "N1BI";
  expect_reach(nested_args, HostReach::not_understood, "nesting over the bound");

  std::string longest = "_ZN2ns" + std::to_string(kMaxMangledNameBytes) +
                        std::string(kMaxMangledNameBytes, 'a') + "E";
  expect_reach(longest, HostReach::not_understood, "a name over the bound");
  expect_reach("_ZN99999999999a1xE", HostReach::not_understood, "a number over the bound");
}

}  // namespace
}  // namespace kcache::compiler
