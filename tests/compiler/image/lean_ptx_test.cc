// The lean pass over hand-written PTX: what it removes, what it must keep,
// and that anything it does not understand leaves the PTX as it was.
#include "compiler/image/lean_ptx.h"

#include <gtest/gtest.h>

namespace kcache::compiler {
namespace {

const std::string kHeader = ".version 9.0\n.target sm_90\n.address_size 64\n\n";

// A CCCL-style internal variable, named `cuda::std::__4::<tag>::value`: in
// libcu++'s versioned namespace, so no host can name it.
std::string cccl(const std::string& tag) {
  return "_ZN4cuda3std3__4" + std::to_string(tag.size()) + tag + "5valueE";
}

std::string var(const std::string& name, const std::string& init = "") {
  return ".global .align 4 .u32 " + name + (init.empty() ? "" : " = " + init) + ";\n";
}

std::string kernel_using(const std::string& name) {
  return ".visible .entry k(\n\t.param .u64 k_param_0\n)\n{\n\t.reg .b64 %rd<3>;\n"
         "\tmov.u64 %rd1, " +
         name + ";\n\tret;\n}\n";
}

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// `name` is still declared (not only used).
bool declared(const std::string& text, const std::string& name) {
  return has(text, " " + name + " =") || has(text, " " + name + ";") || has(text, " " + name + "[");
}

TEST(LeanPtxTest, RemovesUnreferencedLibraryVariablesAndKeepsReferencedOnes) {
  std::string ptx = kHeader + var(cccl("a")) + var(cccl("b"), "7") + kernel_using(cccl("b"));
  LeanPtx lean = lean_ptx(ptx, {});
  ASSERT_TRUE(lean.changed) << lean.why;
  EXPECT_FALSE(has(lean.ptx, cccl("a")));
  EXPECT_TRUE(has(lean.ptx, var(cccl("b"), "7")));
  EXPECT_EQ(lean.variables_removed, 1u);
  EXPECT_EQ(lean.variables_kept, 1u);
  EXPECT_EQ(lean.bytes_removed, var(cccl("a")).size());
  EXPECT_EQ(lean.ptx.size() + lean.bytes_removed, ptx.size());
}

TEST(LeanPtxTest, KeepsWhatAKeptInitializerReferencesToAFixpoint) {
  // k -> a -> b -> c are kept; d is referenced only by e, and neither by a kept one.
  std::string ptx = kHeader + ".global .align 8 .u64 " + cccl("a") + " = generic(" + cccl("b") +
                    ");\n" + ".global .align 8 .u64 " + cccl("b") + "[2] = {" + cccl("c") +
                    ", 0};\n" + var(cccl("c")) + var(cccl("d")) + ".global .align 8 .u64 " +
                    cccl("e") + " = " + cccl("d") + ";\n" + kernel_using(cccl("a"));
  LeanPtx lean = lean_ptx(ptx, {});
  ASSERT_TRUE(lean.changed) << lean.why;
  for (const char* kept : {"a", "b", "c"}) EXPECT_TRUE(declared(lean.ptx, cccl(kept))) << kept;
  EXPECT_FALSE(has(lean.ptx, cccl("d")));
  EXPECT_FALSE(has(lean.ptx, cccl("e")));
  EXPECT_EQ(lean.variables_removed, 2u);
}

TEST(LeanPtxTest, KeepsEveryVariableWithLinkageOrAnotherStateSpace) {
  std::string n = cccl("x");
  for (std::string decl :
       {".visible .global .align 4 .u32 " + n + ";\n", ".extern .global .align 4 .u32 " + n + ";\n",
        ".weak .global .align 4 .u32 " + n + ";\n", ".common .global .align 4 .u32 " + n + ";\n",
        ".const .align 4 .u32 " + n + " = 1;\n", ".shared .align 4 .u32 " + n + ";\n",
        ".global .texref " + n + ";\n", ".global .surfref " + n + ";\n",
        ".global .samplerref " + n + ";\n",
        ".global .attribute(.managed) .align 4 .u32 " + n + ";\n"}) {
    std::string ptx = kHeader + decl + kernel_using("%rd0");
    LeanPtx lean = lean_ptx(ptx, {});
    EXPECT_FALSE(lean.changed) << decl;
    EXPECT_EQ(lean.ptx, ptx) << decl;
  }
}

TEST(LeanPtxTest, KeepsAUsersOwnVariablesEvenWhenInternal) {
  // NVRTC emits `__device__ int counter;` as an internal .global; the driver
  // may still be asked for it by name.
  std::string ptx = kHeader + var("counter") + var("_ZN2ns5countE") + kernel_using("%rd0");
  LeanPtx lean = lean_ptx(ptx, {});
  EXPECT_FALSE(lean.changed);
  EXPECT_EQ(lean.ptx, ptx);
}

// Issue 19: the rule is what a host can name, not the namespace.
TEST(LeanPtxTest, KeepsAUsersVariablesInLibraryNamespaces) {
  // namespace cuda { namespace my { __device__ int knob = 11; } } and
  // namespace cub { __device__ int knob; }: cuModuleGetGlobal may ask for them.
  std::string ptx = kHeader + var("_ZN4cuda2my4knobE", "11") + var("_ZN3cub4knobE") +
                    var(cccl("a")) + kernel_using("%rd0");
  LeanPtx lean = lean_ptx(ptx, {});
  ASSERT_TRUE(lean.changed) << lean.why;
  EXPECT_TRUE(declared(lean.ptx, "_ZN4cuda2my4knobE"));
  EXPECT_TRUE(declared(lean.ptx, "_ZN3cub4knobE"));
  EXPECT_FALSE(has(lean.ptx, cccl("a")));
  EXPECT_EQ(lean.removed, std::vector<std::string>{cccl("a")});
}

TEST(LeanPtxTest, RemovesUnreferencedTemplateInstancesOfAnyLibrary) {
  // cute::C<1>::value, a user's own ns::Traits<int>::size, a variable
  // template instance: reachable only through nvrtcGetLoweredName.
  std::vector<std::string> names = {"_ZN4cute1CILi1EE5valueE", "_ZN2ns6TraitsIiE4sizeE",
                                    "_ZN2ns1vIiEE"};
  std::string ptx = kHeader;
  for (const std::string& n : names) ptx += var(n, "1");
  ptx += kernel_using("%rd0");
  LeanPtx lean = lean_ptx(ptx, {});
  ASSERT_TRUE(lean.changed) << lean.why;
  EXPECT_EQ(lean.removed, names);
  EXPECT_EQ(lean.ptx, kHeader + kernel_using("%rd0"));
}

TEST(LeanPtxTest, KeepsNamesTheManglingParserDoesNotUnderstand) {
  // A local static, an ABI tag, an expression as a template argument.
  std::string ptx = kHeader + var("_ZZ4mainE1x") + var("_ZN2ns1xB5cxx11E") +
                    var("_ZN2ns1AIXadL_Z1fvEEE1xE") + kernel_using("%rd0");
  LeanPtx lean = lean_ptx(ptx, {});
  EXPECT_FALSE(lean.changed);
  EXPECT_EQ(lean.ptx, ptx);
}

TEST(LeanPtxTest, KeepsATemplateInstanceANameExpressionNames) {
  std::string ptx =
      kHeader + var("_ZN4cute1CILi1EE5valueE") + var("_ZN4cute1CILi2EE5valueE") + kernel_using("%rd0");
  LeanPtx lean = lean_ptx(ptx, {"_ZN4cute1CILi2EE5valueE"});
  ASSERT_TRUE(lean.changed);
  EXPECT_TRUE(declared(lean.ptx, "_ZN4cute1CILi2EE5valueE"));
  EXPECT_FALSE(has(lean.ptx, "_ZN4cute1CILi1EE5valueE"));
}

TEST(LeanPtxTest, KeepsWhatANameExpressionNames) {
  std::string ptx = kHeader + var(cccl("a")) + var(cccl("b")) + kernel_using("%rd0");
  LeanPtx lean = lean_ptx(ptx, {cccl("b")});
  ASSERT_TRUE(lean.changed);
  EXPECT_TRUE(has(lean.ptx, cccl("b")));
  EXPECT_FALSE(has(lean.ptx, cccl("a")));
}

TEST(LeanPtxTest, RemovesNvrtcsAnonymousNamespaceObjectsOfCccl) {
  std::string cpo = "_ZN34_INTERNAL_00000000_4_k_cu_efc770de4cuda3std3__45__cpo5beginE";
  std::string ptx = kHeader + ".global .align 1 .b8 " + cpo + "[1];\n" + kernel_using("%rd0");
  LeanPtx lean = lean_ptx(ptx, {});
  ASSERT_TRUE(lean.changed) << lean.why;
  EXPECT_FALSE(has(lean.ptx, cpo));
}

TEST(LeanPtxTest, PtxWithNothingRemovableComesOutByteIdentical) {
  std::string ptx = kHeader + "// a comment\n" + var(cccl("b"), "{1}") + kernel_using(cccl("b")) +
                    ".func (.param .b32 r) f(.param .b32 a)\n;\n";
  LeanPtx lean = lean_ptx(ptx, {});
  EXPECT_FALSE(lean.changed);
  EXPECT_EQ(lean.why, "");
  EXPECT_EQ(lean.ptx, ptx);
}

TEST(LeanPtxTest, DamagedOrUnexpectedPtxIsLeftUnchangedWithAReason) {
  std::string good = kHeader + var(cccl("a")) + kernel_using("%rd0");
  std::vector<std::string> bad = {
      good.substr(0, good.size() - 3),                                // truncated body
      kHeader + var(cccl("a")) + ".section .debug_info { .b8 1 }\n",  // debug sections (-G)
      kHeader + var(cccl("a")) + "mov.u32 %r1, 1;\n",                 // an instruction at top level
      kHeader + var(cccl("a")) + ".pragma \"nounroll;\n",             // an unterminated string
      kHeader + var(cccl("a")) + var(cccl("a")) + kernel_using("%rd0"),  // declared twice
      kHeader + var(cccl("a")) + "/* open comment\n" + kernel_using("%rd0"),
      kHeader + var(cccl("a")) + ".visible .entry k() { ) }\n",  // unbalanced
      kHeader + var(cccl("a")) + std::string("\x01", 1) + kernel_using("%rd0"),
      kHeader + var(cccl("a")) + ".global .align 4 .u32 x",      // never ends
      kHeader + var(cccl("a")) + std::string(300, '(') + ";\n",  // too deep
  };
  for (const std::string& ptx : bad) {
    LeanPtx lean = lean_ptx(ptx, {});
    EXPECT_FALSE(lean.changed) << ptx;
    EXPECT_EQ(lean.ptx, ptx);
    EXPECT_NE(lean.why, "") << ptx;
  }
}

TEST(LeanPtxTest, LeanPtxIsAFixpoint) {
  std::string ptx = kHeader + var(cccl("a")) + var(cccl("b"), cccl("c")) + var(cccl("c")) +
                    kernel_using(cccl("c"));
  LeanPtx once = lean_ptx(ptx, {});
  ASSERT_TRUE(once.changed);
  LeanPtx twice = lean_ptx(once.ptx, {});
  EXPECT_FALSE(twice.changed);
  EXPECT_EQ(twice.ptx, once.ptx);
}

TEST(LeanPtxTest, AStatementSharingALineKeepsTheRestOfTheLine) {
  std::string ptx = kHeader + var(cccl("b")).substr(0, var(cccl("b")).size() - 1) + " " +
                    var(cccl("a")) + kernel_using(cccl("b"));
  LeanPtx lean = lean_ptx(ptx, {});
  ASSERT_TRUE(lean.changed);
  EXPECT_TRUE(has(lean.ptx, var(cccl("b")).substr(0, var(cccl("b")).size() - 1)));
  EXPECT_FALSE(has(lean.ptx, cccl("a")));
}

// Class constants (class_constants.h): the program's text says which
// external names are a class's constant static data members.
const std::string kMatrixCoord = "_ZN7cutlass11MatrixCoord4kRowE";

LeanPtx lean_with_text(const std::string& ptx, const std::vector<std::string>& texts,
                       const std::vector<std::string>& options = {}) {
  ClassConstants classes(texts, options);
  return lean_ptx(ptx, {}, &classes);
}

TEST(ClassConstantsTest, RemovesAnUnreferencedClassConstantDeclaredInItsClass) {
  const std::string text =
      "namespace cutlass {\n"
      "struct MatrixCoord : public Coord<2, int> {\n"
      "  /// the row\n"
      "  static int const kRow = 0;\n"
      "  static constexpr int kColumn = 1;\n"
      "  CUTLASS_HOST_DEVICE MatrixCoord() { int kRow = 3; (void)kRow; }\n"
      "};\n"
      "}\n";
  const std::string column = "_ZN7cutlass11MatrixCoord7kColumnE";
  std::string ptx = kHeader + var(kMatrixCoord) + var(column, "1") + kernel_using(column);
  LeanPtx lean = lean_with_text(ptx, {text});
  ASSERT_TRUE(lean.changed) << lean.why;
  EXPECT_FALSE(declared(lean.ptx, kMatrixCoord));
  EXPECT_TRUE(declared(lean.ptx, column)) << "a referenced constant stays";
  // Without the text the rule of lean-v2 holds: a host could name it.
  LeanPtx without = lean_ptx(ptx, {});
  EXPECT_FALSE(without.changed);
  EXPECT_EQ(without.host_nameable_kept, 2u) << "the text has something to decide";
  EXPECT_EQ(lean_ptx(kHeader + var(cccl("a")), {}).host_nameable_kept, 0u);
}

TEST(ClassConstantsTest, KeepsANamespaceVariableInANamespaceNamedLikeAClass) {
  // `struct MatrixCoord` elsewhere declares kRow, but `cutlass::MatrixCoord`
  // may be this namespace: a user's __device__ variable.
  const std::string text =
      "namespace other { struct MatrixCoord { static int const kRow = 0; }; }\n"
      "namespace cutlass { namespace MatrixCoord { __device__ int kRow; } }\n";
  EXPECT_FALSE(lean_with_text(kHeader + var(kMatrixCoord), {text}).changed);
  // The same, C++17 style, split over two files.
  EXPECT_FALSE(lean_with_text(kHeader + var(kMatrixCoord),
                              {"struct MatrixCoord { static int const kRow = 0; };\n",
                               "namespace cutlass::MatrixCoord { __device__ int kRow; }\n"})
                   .changed);
}

TEST(ClassConstantsTest, KeepsNonConstStaticMembersAndUndeclaredOnes) {
  // -default-device makes `static int hits;` a real device variable.
  const std::string text =
      "struct Counters { static int hits; static const int limit = 4; };\n"
      "int Counters::hits = 0;\n";
  std::string ptx = kHeader + var("_ZN8Counters4hitsE") + var("_ZN8Counters5limitE", "4") +
                    var("_ZN8Counters7missingE");
  LeanPtx lean = lean_with_text(ptx, {text});
  ASSERT_TRUE(lean.changed) << lean.why;
  EXPECT_TRUE(declared(lean.ptx, "_ZN8Counters4hitsE"));
  EXPECT_FALSE(declared(lean.ptx, "_ZN8Counters5limitE"));
  EXPECT_TRUE(declared(lean.ptx, "_ZN8Counters7missingE")) << "declared in no class body it read";
  // A class named twice, once with a non-const member of the name: undecided.
  EXPECT_FALSE(lean_with_text(kHeader + var("_ZN2ns1S1vE"),
                              {"namespace a { struct S { static const int v = 1; }; }\n"
                               "namespace b { struct S { static int v; }; }\n"})
                   .changed);
}

TEST(ClassConstantsTest, KeepsWhatAMacroCouldSpell) {
  const std::string cls = "struct MatrixCoord { static int const kRow = 0; };\n";
  const std::string ptx = kHeader + var(kMatrixCoord);
  // The namespace's name, or the member's, in a macro.
  EXPECT_FALSE(lean_with_text(ptx, {cls, "#define NS MatrixCoord\nnamespace cutlass {\n"
                                         "namespace NS { __device__ int kRow; } }\n"})
                   .changed);
  EXPECT_FALSE(lean_with_text(ptx, {cls}, {"-DNS=MatrixCoord"}).changed);
  EXPECT_FALSE(lean_with_text(ptx, {cls, "#define kRow kRow\n"}).changed);
  // A macro naming a namespace after its parameter, as libcu++'s
  // _LIBCUDACXX_BEGIN_NAMESPACE_CPO(__swap): its arguments are namespace
  // names, also through a macro that passes its own on.
  const std::string begin = "#define BEGIN(n) namespace n {\n";
  EXPECT_FALSE(
      lean_with_text(ptx, {cls, begin + "BEGIN(MatrixCoord) __device__ int kRow; }\n"}).changed);
  EXPECT_FALSE(lean_with_text(ptx, {cls, "OUTER(MatrixCoord) __device__ int kRow; }\n",
                                    begin + "#define OUTER(x, ...) BEGIN(x)\n"})
                   .changed);
  EXPECT_TRUE(lean_with_text(ptx, {cls, begin + "BEGIN(__swap) }\n"}).changed);
  // A namespace named by pasting, or after an argument that is not one name:
  // a name pasted from what those macros and their calls hold is undecided.
  for (std::string text : std::vector<std::string>{
           "#define CAT(a, b) a##b\nnamespace cutlass { namespace CAT(Matrix, Coord) {} }\n",
           "#define NS Matrix##Coord\nnamespace NS {}\n",
           begin + "BEGIN(Matrix ## Coord) }\n",
       }) {
    ClassConstants classes({cls, text}, {});
    EXPECT_FALSE(classes.is_class_constant(kMatrixCoord)) << text;
    EXPECT_FALSE(classes.computed_why().empty()) << text;
  }
  // One that cannot make the class's name (libcu++'s `__` ## 4) decides nothing.
  EXPECT_TRUE(lean_with_text(ptx, {cls, "#define CAT(x, y) x##y\n#define ABI CAT(__, 4)\n"
                                        "namespace cuda { namespace ABI {} }\n"})
                  .changed);
  // Nor one under #ifdef of a macro nothing defines, as CUTLASS's
  // CUTLASS_NAMESPACE; with -D it counts.
  const std::string ifdef =
      "#ifdef USER_NS\n#define CAT(a, b) a##b\n#define cutlass CAT(Matrix, USER_NS)\n#endif\n"
      "namespace cutlass {}\n";
  EXPECT_TRUE(lean_with_text(ptx, {cls, ifdef}).changed);
  EXPECT_FALSE(lean_with_text(ptx, {cls, ifdef}, {"-DUSER_NS=Coord"}).changed);
  // A comment or a string mentioning a namespace changes nothing.
  EXPECT_TRUE(lean_with_text(ptx, {cls, "// namespace MatrixCoord\nconst char* s = \"#define "
                                        "MatrixCoord\";\n"})
                  .changed);
}

TEST(ClassConstantsTest, DecidesOnlyPlainNestedNames) {
  ClassConstants classes({"struct S { static const int v = 1; };\n"}, {});
  EXPECT_TRUE(classes.is_class_constant("_ZN2ns1S1vE"));
  EXPECT_TRUE(classes.is_class_constant("_ZN1S1vE"));
  for (const char* name : {"v", "_ZN1vE", "_ZNSt1S1vE", "_ZN1S1vEE", "_ZN1S2vE", "_ZN1S01vE",
                           "_ZN1S99999999999999999999vE", "_ZN2ns1SIiE1vE", "_ZN1S1v"}) {
    EXPECT_FALSE(classes.is_class_constant(name)) << name;
  }
  EXPECT_FALSE(ClassConstants().is_class_constant("_ZN1S1vE")) << "no text, no decision";
}

}  // namespace
}  // namespace kcache::compiler
