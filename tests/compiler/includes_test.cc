#include "compiler/includes.h"

#include <gtest/gtest.h>

#include "common/error.h"
#include "tests/compiler/test_files.h"

namespace kcache::compiler {
namespace {

using testing::ScopedCwd;
using testing::test_dir;
using testing::write;

std::vector<std::string> names(const std::vector<IncludeDirective>& ds) {
  std::vector<std::string> out;
  for (const IncludeDirective& d : ds) out.push_back(d.name);
  return out;
}

std::vector<std::string> header_names(const IncludeGraph& g) {
  std::vector<std::string> out;
  for (const ResolvedHeader& h : g.headers) out.push_back(h.name);
  return out;
}

const ResolvedHeader* header(const IncludeGraph& g, const std::string& name) {
  for (const ResolvedHeader& h : g.headers) {
    if (h.name == name) return &h;
  }
  return nullptr;
}

// -- line splices, trigraphs, #line (issue 18) ------------------------------

// NVRTC joins a backslash and CR LF like a backslash and LF: the `#if 0`
// below is inside the line comment, so the group is live.
TEST(ScanIncludesTest, BackslashCrLfIsALineSplice) {
  auto ds = scan_includes("// note \\\r\n#if 0\r\n#include \"a.h\"\r\n#endif\r\n#include \"b.h\"\r\n");
  EXPECT_EQ(names(ds), (std::vector<std::string>{"a.h", "b.h"}));
  EXPECT_EQ(ds[0].line, 3);
  EXPECT_EQ(ds[1].line, 5);
  // In a directive name, a blank run and a string too.
  EXPECT_EQ(names(scan_includes("#inc\\\r\nlude \\\r\n \"c.h\"\r\n")),
            std::vector<std::string>{"c.h"});
  EXPECT_EQ(names(scan_includes("\"a \\\r\n #include \\\"no.h\\\" \"\r\n#include \"d.h\"\r\n")),
            std::vector<std::string>{"d.h"});
}

TEST(ScanIncludesTest, CrLfLineEndsKeepIfZeroDead) {
  EXPECT_TRUE(scan_includes("#if 0\r\n#include \"a.h\"\r\n#endif\r\n").empty());
  EXPECT_TRUE(scan_includes("#if 0 // c\r\n#include \"a.h\"\r\n#endif\r\n").empty());
  // A CR alone ends no line (NVRTC 13): this is all one comment.
  EXPECT_TRUE(scan_includes("// x\r#include \"a.h\"\n").empty());
  // A blank between the backslash and the line end makes no splice.
  EXPECT_TRUE(scan_includes("// x \\ \r\n#if 0\r\n#include \"a.h\"\r\n#endif\r\n").empty());
}

TEST(ScanIncludesTest, TrigraphSpliceOnlyWhenTrigraphsAreOn) {
  const std::string text = "// x ?\?/\n#if 0\n#include \"a.h\"\n#endif\n?\?=include \"b.h\"\n";
  EXPECT_TRUE(scan_includes(text).empty());
  ScanOptions on;
  on.trigraphs = true;
  EXPECT_EQ(names(scan_includes(text, on)), (std::vector<std::string>{"a.h", "b.h"}));
}

TEST(ScanIncludesTest, RecordsLineNamesUnescaped) {
  ScannedFile f = scan_file(
      "#line 10 \"gen/a.cu\"\n# 20 \"b\\\\c.h\" 1\n#line 30\n#if 0\n#line 1 \"dead.h\"\n#endif\n"
      "#line 40 \"gen/a.cu\"\n");
  EXPECT_EQ(f.line_names, (std::vector<std::string>{"gen/a.cu", "b\\c.h"}));
}

TEST(ScanIncludesTest, MarksIncludeNextWithItsByteRange) {
  const std::string text = "int x;\n#  include_next <x.h> // c\n#if __has_include_next(\"y.h\")\n";
  auto ds = scan_includes(text);
  ASSERT_EQ(ds.size(), 2u);
  EXPECT_TRUE(ds[0].next);
  EXPECT_EQ(text.substr(ds[0].begin, ds[0].end - ds[0].begin), "include_next <x.h>");
  EXPECT_TRUE(ds[1].next);
  EXPECT_TRUE(ds[1].probe);
  EXPECT_EQ(text.substr(ds[1].begin, ds[1].end - ds[1].begin), "__has_include_next(\"y.h\"");
  EXPECT_FALSE(scan_includes("#include <x.h>\n")[0].next);
  // The digraph of #, and a splice inside the directive's name.
  const std::string split = "%:include_\\\r\nnext <x.h>\n";
  ds = scan_includes(split);
  ASSERT_EQ(ds.size(), 1u);
  EXPECT_TRUE(ds[0].next);
  EXPECT_EQ(split.substr(ds[0].begin, ds[0].end - ds[0].begin), "include_\\\r\nnext <x.h>");
}

// -- #include_next (issue 18) -------------------------------------------------

TEST(ResolveIncludesTest, IncludeNextContinuesAfterTheFolderTheHeaderWasFoundIn) {
  std::string d = test_dir();
  write(d, "k.cu", "#include <x.h>\n");
  write(d, "d1/x.h", "#include_next \\\n  <x.h>\n#define A 1\n");
  write(d, "d2/x.h", "#include_next <x.h>\n#define B 2\n");
  write(d, "d3/x.h", "#define C 3\n");
  ScopedCwd cwd(d);
  IncludeGraph g = resolve_includes("k.cu", *read_file("k.cu"), {{"d1", "d2", "d3"}, {}, {}});
  EXPECT_EQ(header_names(g), (std::vector<std::string>{"kcache-include-next/1/x.h",
                                                       "kcache-include-next/2/x.h", "x.h"}));
  // Rewritten in the handed text, line numbers kept.
  EXPECT_EQ(header(g, "x.h")->content,
            "#include \"kcache-include-next/1/x.h\"\\\n\n#define A 1\n");
  EXPECT_EQ(header(g, "kcache-include-next/1/x.h")->path, "d2/x.h");
  EXPECT_EQ(header(g, "kcache-include-next/1/x.h")->content,
            "#include \"kcache-include-next/2/x.h\"\n#define B 2\n");
  EXPECT_EQ(header(g, "kcache-include-next/2/x.h")->content, "#define C 3\n");
  EXPECT_TRUE(g.missing.empty());
}

// NVRTC 13 keeps a folder given twice (nvcc's host preprocessor drops the
// second): d1/c.h is compiled twice, as NVRTC given -I d1 -I d1 -I d2 does.
TEST(ResolveIncludesTest, IncludeNextThroughAFolderGivenTwiceFollowsNvrtc) {
  std::string d = test_dir();
  write(d, "k.cu", "#include <c.h>\n");
  write(d, "d1/c.h", "#include_next <c.h>\n");
  write(d, "d2/c.h", "// d2\n");
  ScopedCwd cwd(d);
  IncludeGraph g = resolve_includes("k.cu", *read_file("k.cu"), {{"d1", "d1", "d2"}, {}, {}});
  EXPECT_EQ(header(g, "c.h")->content, "#include \"kcache-include-next/1/c.h\"\n");
  ASSERT_NE(header(g, "kcache-include-next/1/c.h"), nullptr);
  EXPECT_EQ(header(g, "kcache-include-next/1/c.h")->content,
            "#include \"kcache-include-next/2/c.h\"\n");
  EXPECT_EQ(header(g, "kcache-include-next/2/c.h")->content, "// d2\n");
}

TEST(ResolveIncludesTest, IncludeNextOfAHeaderNextToItsIncluderStartsAtTheFirstDashI) {
  std::string d = test_dir();
  write(d, "src/k.cu", "#include \"x.h\"\n");
  write(d, "src/x.h", "#include_next <x.h>\n");
  write(d, "d1/x.h", "// d1\n");
  ScopedCwd cwd(d);
  IncludeGraph g = resolve_includes("src/k.cu", *read_file("src/k.cu"), {{"d1"}, {}, {}});
  EXPECT_EQ(header(g, "x.h")->content, "#include \"kcache-include-next/0/x.h\"\n");
  EXPECT_EQ(header(g, "kcache-include-next/0/x.h")->path, "d1/x.h");
}

TEST(ResolveIncludesTest, IncludeNextIntoTheToolkitOrNowhere) {
  std::string d = test_dir();
  write(d, "k.cu", "#include <t.h>\n#include <n.h>\n");
  write(d, "d1/t.h", "#include_next <t.h>\n");
  write(d, "d1/n.h", "#if __has_include_next(<n.h>)\n#include_next <n.h>\n#endif\n");
  write(d, "tk/t.h", "// toolkit\n");
  ScopedCwd cwd(d);
  IncludeGraph g = resolve_includes("k.cu", *read_file("k.cu"), {{"d1"}, {"tk"}, {}});
  EXPECT_EQ(header(g, "t.h")->content, "#include <./t.h>\n");
  EXPECT_EQ(g.toolkit_includes, std::vector<std::string>{"./t.h"});
  EXPECT_EQ(header(g, "n.h")->content,
            "#if __has_include(\"kcache-include-next/1/n.h\")\n"
            "#include \"kcache-include-next/1/n.h\"\n#endif\n");
  ASSERT_EQ(g.missing.size(), 1u);
  EXPECT_EQ(g.missing[0].stub, "");  // probed: absent, so __has_include is false
}

TEST(ResolveIncludesTest, IncludeNextInTheKernelSourceIsAnInclude) {
  std::string d = test_dir();
  write(d, "k.cu", "#include_next <x.h>\n");
  write(d, "d1/x.h", "// d1\n");
  ScopedCwd cwd(d);
  IncludeGraph g = resolve_includes("k.cu", *read_file("k.cu"), {{"d1"}, {}, {}});
  EXPECT_EQ(header_names(g), std::vector<std::string>{"x.h"});
  EXPECT_FALSE(g.root_content);
  // An asked header found in d1 is the root: its #include_next is rewritten.
  g = resolve_includes("d1/x.h", "#include_next <x.h>\n", {{"d1", "d2"}, {}, {}, 1});
  ASSERT_TRUE(g.root_content);
  EXPECT_EQ(*g.root_content, "#include \"kcache-include-next/2/x.h\"\n");
  ASSERT_EQ(g.missing.size(), 1u);
  EXPECT_NE(g.missing[0].stub.find("the #include_next of \"x.h\""), std::string::npos);
}

// -- scanning ---------------------------------------------------------------

TEST(ScanIncludesTest, FindsQuotedAndAngledWithLines) {
  auto ds = scan_includes("#include \"a.h\"\n  #  include <b/c.h>\n#include_next \"d.h\"\n");
  ASSERT_EQ(ds.size(), 3u);
  EXPECT_EQ(ds[0].name, "a.h");
  EXPECT_FALSE(ds[0].angled);
  EXPECT_EQ(ds[0].line, 1);
  EXPECT_EQ(ds[1].name, "b/c.h");
  EXPECT_TRUE(ds[1].angled);
  EXPECT_EQ(ds[1].line, 2);
  EXPECT_EQ(ds[2].line, 3);
}

TEST(ScanIncludesTest, SkipsCommentsAndStrings) {
  auto ds = scan_includes(
      "// #include \"line_comment.h\"\n"
      "/* #include \"block.h\"\n#include \"block2.h\" */\n"
      "const char* s = \"#include \\\"string.h\\\"\";\n"
      "const char* r = R\"x(\n#include \"raw.h\"\n)x\";\n"
      "int big = 1'000'000; char q = '\"';\n"
      "#error don't stop here\n"
      "#include \"real.h\"\n");
  EXPECT_EQ(names(ds), std::vector<std::string>{"real.h"});
  EXPECT_EQ(ds[0].line, 10);
}

TEST(ScanIncludesTest, HashMustStartTheLine) {
  EXPECT_TRUE(scan_includes("int x; #include \"no.h\"\n").empty());
  EXPECT_EQ(names(scan_includes("/* c */ #include \"yes.h\"\n")),
            std::vector<std::string>{"yes.h"});
}

TEST(ScanIncludesTest, FindsHasIncludeProbes) {
  auto ds = scan_includes("#if __has_include(<opt/a.h>) && __has_include ( \"b.h\" )\n#endif\n");
  ASSERT_EQ(ds.size(), 2u);
  EXPECT_TRUE(ds[0].probe);
  EXPECT_TRUE(ds[0].angled);
  EXPECT_EQ(ds[1].name, "b.h");
  EXPECT_TRUE(ds[1].probe);
}

TEST(ScanIncludesTest, LeavesComputedIncludesAlone) {
  EXPECT_TRUE(scan_includes("#define H \"x.h\"\n#include H\n").empty());
}

// -- dead groups: `#if 0` and `#elif 0` -------------------------------------

TEST(ScanIncludesTest, SkipsIncludesAndProbesUnderIfZero) {
  auto ds = scan_includes(
      "#include \"before.h\"\n#if 0\n#include \"debug.h\"\n#if __has_include(<opt.h>)\n#endif\n"
      "#endif\n#include \"after.h\"\n");
  EXPECT_EQ(names(ds), (std::vector<std::string>{"before.h", "after.h"}));
  EXPECT_EQ(ds[1].line, 7);
}

TEST(ScanIncludesTest, ElseOfIfZeroIsLive) {
  EXPECT_EQ(names(scan_includes("#if 0\n#include \"off.h\"\n#else\n#include \"on.h\"\n#endif\n")),
            std::vector<std::string>{"on.h"});
  // Whichever #elif may be taken: only the literal 0 is dead.
  EXPECT_EQ(names(scan_includes("#if 0\n#include \"a.h\"\n#elif defined(X)\n#include \"b.h\"\n"
                                "#elif 0\n#include \"c.h\"\n#else\n#include \"d.h\"\n#endif\n")),
            (std::vector<std::string>{"b.h", "d.h"}));
  EXPECT_EQ(names(scan_includes("#if 0\n#elif __has_include(\"p.h\")\n#include \"p.h\"\n#endif\n")),
            (std::vector<std::string>{"p.h", "p.h"}));
}

// A conditional opened inside a dead group ends there: its #endif, #else and
// #elif do not end or revive the dead group.
TEST(ScanIncludesTest, NestedConditionalsInsideIfZeroStayDead) {
  auto ds = scan_includes(
      "#if 0\n"
      "#ifdef A\n#include \"a.h\"\n#else\n#include \"b.h\"\n#endif\n"
      "#if 1\n#elif 2\n#include \"c.h\"\n#endif\n"
      "#ifndef B\n#if 0\n#endif\n#include \"d.h\"\n#endif\n"
      "#include \"e.h\"\n"
      "#else\n#include \"live.h\"\n#ifdef C\n#include \"live2.h\"\n#endif\n#endif\n"
      "#include \"after.h\"\n");
  EXPECT_EQ(names(ds), (std::vector<std::string>{"live.h", "live2.h", "after.h"}));
}

TEST(ScanIncludesTest, ElifZeroIsDead) {
  EXPECT_EQ(names(scan_includes("#ifdef A\n#include \"a.h\"\n#elif 0\n#include \"off.h\"\n"
                                "#else\n#include \"b.h\"\n#endif\n#include \"c.h\"\n")),
            (std::vector<std::string>{"a.h", "b.h", "c.h"}));
  EXPECT_EQ(names(scan_includes("#if X\n#elif 0\n#include \"off.h\"\n#elif Y\n#include \"y.h\"\n"
                                "#endif\n")),
            std::vector<std::string>{"y.h"});
}

TEST(ScanIncludesTest, IfZeroInsideALiveIfdefBranch) {
  EXPECT_EQ(names(scan_includes("#ifdef DEBUG\n#include \"a.h\"\n#if 0\n#include \"off.h\"\n"
                                "#endif\n#include \"b.h\"\n#else\n#include \"c.h\"\n#endif\n"
                                "#include \"d.h\"\n")),
            (std::vector<std::string>{"a.h", "b.h", "c.h", "d.h"}));
}

TEST(ScanIncludesTest, SpacesCommentsAndLineContinuationsAroundIfZero) {
  for (const char* dead : {"#if 0\n", "# if 0\n", "  #  if   0  \n", "#if 0 // debug\n",
                           "#if 0 /* debug */\n", "#if/**/0\n", "#if \\\n 0\n", "#i\\\nf 0\n",
                           "#if 0\r\n", "%:if 0\n", "#if 0 /* two\nlines */\n"}) {
    std::string text = std::string(dead) + "#include \"off.h\"\n#endif\n#include \"on.h\"\n";
    EXPECT_EQ(names(scan_includes(text)), std::vector<std::string>{"on.h"}) << dead;
  }
  // The closing directives, spelled in every way, still close.
  EXPECT_EQ(names(scan_includes("#if 0\n#include \"a.h\"\n# end\\\nif\n#include \"b.h\"\n")),
            std::vector<std::string>{"b.h"});
  EXPECT_EQ(names(scan_includes("#if 0\n#include \"a.h\"\n%:  else\n#include \"b.h\"\n#endif\n")),
            std::vector<std::string>{"b.h"});
  // An #endif hidden in a comment or a string does not close.
  EXPECT_EQ(names(scan_includes("#if 0\n/*\n#endif\n*/\n#include \"a.h\"\nconst char* s = \""
                                "#endif\";\n#include \"b.h\"\n#endif\n#include \"c.h\"\n")),
            std::vector<std::string>{"c.h"});
}

// Only the pp-number `0` alone is known dead without evaluating macros; the
// rest is followed (over-keying, never a wrong hit).
TEST(ScanIncludesTest, OnlyTheLiteralZeroIsDead) {
  for (const char* live :
       {"#if 00\n", "#if 0x0\n", "#if 0u\n", "#if 0L\n", "#if 0.\n", "#if (0)\n", "#if 0 && X\n",
        "#if 0 /* c */ || 1\n", "#if 0 /* two\nlines */ + 1\n", "#if \\\n0\\\n1\n", "#if ZERO\n",
        "#if 1\n", "#if !1\n", "#if false\n", "#ifdef NEVER_DEFINED\n", "#ifndef _WIN32\n",
        "#if 0'0\n", "#if\n", "#ifdef 0\n"}) {
    std::string text = std::string(live) + "#include \"on.h\"\n#endif\n";
    EXPECT_EQ(names(scan_includes(text)), std::vector<std::string>{"on.h"}) << live;
  }
  // `#if 1 ... #else` is not special either: the #else is followed.
  EXPECT_EQ(names(scan_includes("#if 1\n#include \"a.h\"\n#else\n#include \"b.h\"\n#endif\n")),
            (std::vector<std::string>{"a.h", "b.h"}));
}

TEST(ScanIncludesTest, UnbalancedConditionalsAreSafe) {
  // A stray #endif or #else while live changes nothing; an unterminated
  // #if 0 is dead to the end (NVRTC rejects the file anyway).
  EXPECT_EQ(names(scan_includes("#endif\n#else\n#include \"a.h\"\n#if 0\n#include \"b.h\"\n")),
            std::vector<std::string>{"a.h"});
}

TEST(ScanIncludesTest, DeepNestingInsideIfZeroIsBounded) {
  std::string text = "#if 0\n";
  for (int i = 0; i < 200000; ++i) text += "#ifdef X\n";
  text += "#include \"deep.h\"\n";
  for (int i = 0; i < 200000; ++i) text += "#endif\n";
  text += "#include \"still_dead.h\"\n#endif\n#include \"live.h\"\n";
  EXPECT_EQ(names(scan_includes(text)), std::vector<std::string>{"live.h"});
}

// -- resolving --------------------------------------------------------------

TEST(ResolveIncludesTest, QuotedIncludeIsFoundNextToTheIncluderThenInEachDir) {
  std::string d = test_dir();
  write(d, "src/k.cu", "#include \"near.h\"\n#include \"far.h\"\n");
  write(d, "src/near.h", "// near\n");
  write(d, "inc1/far.h", "// far 1\n");
  write(d, "inc2/far.h", "// far 2\n");
  ScopedCwd cwd(d);
  IncludeGraph g = resolve_includes("src/k.cu", *read_file("src/k.cu"), {{"inc1", "inc2"}, {}, {}});
  EXPECT_EQ(header_names(g), (std::vector<std::string>{"far.h", "near.h"}));
  EXPECT_EQ(header(g, "far.h")->content, "// far 1\n");
  EXPECT_EQ(header(g, "far.h")->path, "inc1/far.h");
  EXPECT_TRUE(g.missing.empty());
}

TEST(ResolveIncludesTest, AngledIncludeIsNotLookedForNextToTheIncluder) {
  std::string d = test_dir();
  write(d, "src/k.cu", "#include <near.h>\n");
  write(d, "src/near.h", "// near\n");
  ScopedCwd cwd(d);
  IncludeGraph g = resolve_includes("src/k.cu", *read_file("src/k.cu"), {{}, {}, {}});
  EXPECT_TRUE(g.headers.empty());
  ASSERT_EQ(g.missing.size(), 1u);
  EXPECT_EQ(g.missing[0].name, "near.h");
}

// Under Bazel's worker only declared inputs may be read: an undeclared file is
// as good as absent, so the next folder is searched and, found nowhere, the
// include gets the stub naming it.
TEST(ResolveIncludesTest, FilesItMayNotReadAreTreatedAsAbsent) {
  std::string d = test_dir();
  write(d, "src/k.cu", "#include \"near.h\"\n#include \"gone.h\"\n");
  write(d, "src/near.h", "// near, undeclared\n");
  write(d, "inc/near.h", "// declared\n");
  write(d, "src/gone.h", "// undeclared\n");
  ScopedCwd cwd(d);
  MayRead may_read = [](const std::string& path) {
    return path != "src/near.h" && path != "src/gone.h";
  };
  IncludeGraph g = resolve_includes("src/k.cu", *read_file("src/k.cu"), {{"inc"}, {}, may_read});
  EXPECT_EQ(header_names(g), (std::vector<std::string>{"near.h"}));
  EXPECT_EQ(header(g, "near.h")->path, "inc/near.h");
  ASSERT_EQ(g.missing.size(), 1u);
  EXPECT_EQ(g.missing[0].name, "gone.h");
  EXPECT_NE(g.missing[0].stub.find("was not found"), std::string::npos);
}

// NVRTC 13 serves `#include "b.h"` in an in-memory header named "a/x.h" from
// the in-memory header named "b.h" (the spelling), not "a/b.h". So the nested
// header must be handed over as "b.h", and its content is a/b.h's.
TEST(ResolveIncludesTest, NestedRelativeIncludeIsNamedByItsSpelling) {
  std::string d = test_dir();
  write(d, "k.cu", "#include \"a/x.h\"\n");
  write(d, "a/x.h", "#include \"b.h\"\n");
  write(d, "a/b.h", "#define FROM_A 1\n");
  write(d, "b.h", "#define FROM_TOP 1\n");  // what a wrong lookup would pick
  ScopedCwd cwd(d);
  IncludeGraph g = resolve_includes("k.cu", *read_file("k.cu"), {{}, {}, {}});
  EXPECT_EQ(header_names(g), (std::vector<std::string>{"a/x.h", "b.h"}));
  EXPECT_EQ(header(g, "b.h")->content, "#define FROM_A 1\n");
  EXPECT_EQ(header(g, "b.h")->path, "a/b.h");
}

TEST(ResolveIncludesTest, ParentRelativeIncludeKeepsItsSpelling) {
  std::string d = test_dir();
  write(d, "k.cu", "#include \"a/x.h\"\n");
  write(d, "a/x.h", "#include \"../c/y.h\"\n");
  write(d, "c/y.h", "// y\n");
  ScopedCwd cwd(d);
  IncludeGraph g = resolve_includes("k.cu", *read_file("k.cu"), {{}, {}, {}});
  EXPECT_EQ(header_names(g), (std::vector<std::string>{"../c/y.h", "a/x.h"}));
}

TEST(ResolveIncludesTest, NamesCarryNoCheckoutLocation) {
  std::string d = test_dir();
  write(d, "k.cu", "#include <lib/x.h>\n");
  write(d, "inc/lib/x.h", "#include \"y.h\"\n");
  write(d, "inc/lib/y.h", "// y\n");
  IncludeGraph g = resolve_includes(d + "/k.cu", *read_file(d + "/k.cu"), {{d + "/inc"}, {}, {}});
  EXPECT_EQ(header_names(g), (std::vector<std::string>{"lib/x.h", "y.h"}));
  for (const ResolvedHeader& h : g.headers) EXPECT_EQ(h.name.find(d), std::string::npos);
}

TEST(ResolveIncludesTest, OneSpellingForTwoDifferentFilesHandsTheSecondUnderAnAlias) {
  std::string d = test_dir();
  write(d, "k.cu", "#include \"a/x.h\"\n#include \"b/y.h\"\n");
  write(d, "a/x.h", "#include \"util.h\"\n");
  write(d, "a/util.h", "// a's\n");
  write(d, "b/y.h", "#include \"util.h\"\n");
  write(d, "b/util.h", "// b's\n");
  write(d, "inc/b/util.h", "// taken by <b/util.h> below\n");
  ScopedCwd cwd(d);
  // No -I folder holds b/util.h: a name no file has.
  IncludeGraph g = resolve_includes("k.cu", *read_file("k.cu"), {{}, {}, {}});
  EXPECT_EQ(header_names(g), (std::vector<std::string>{"a/x.h", "b/y.h",
                                                       "kcache-alias/0/util.h", "util.h"}));
  EXPECT_EQ(g.headers[1].content, "#include \"kcache-alias/0/util.h\"\n");
  EXPECT_EQ(g.headers[2].content, "// b's\n");
  EXPECT_EQ(g.headers[3].content, "// a's\n");
  // Beneath an -I folder: its path there ("b/util.h"), unless that is taken.
  g = resolve_includes("k.cu", *read_file("k.cu"), {{"."}, {}, {}});
  EXPECT_EQ(header_names(g), (std::vector<std::string>{"a/x.h", "b/util.h", "b/y.h", "util.h"}));
  write(d, "k.cu", "#include <b/util.h>\n#include \"a/x.h\"\n#include \"b/y.h\"\n");
  g = resolve_includes("k.cu", *read_file("k.cu"), {{"inc", "."}, {}, {}});
  EXPECT_EQ(header_names(g), (std::vector<std::string>{"a/x.h", "b/util.h", "b/y.h",
                                                       "kcache-alias/0/util.h", "util.h"}));
}

TEST(ResolveIncludesTest, OneSpellingForTwoIdenticalFilesIsFine) {
  std::string d = test_dir();
  write(d, "k.cu", "#include \"a/x.h\"\n#include \"b/y.h\"\n");
  write(d, "a/x.h", "#include \"util.h\"\n");
  write(d, "a/util.h", "// same\n");
  write(d, "b/y.h", "#include \"util.h\"\n");
  write(d, "b/util.h", "// same\n");
  ScopedCwd cwd(d);
  IncludeGraph g = resolve_includes("k.cu", *read_file("k.cu"), {{}, {}, {}});
  EXPECT_EQ(header_names(g), (std::vector<std::string>{"a/x.h", "b/y.h", "util.h"}));
}

TEST(ResolveIncludesTest, ToolkitHeadersAreLeftToNvrtc) {
  std::string d = test_dir();
  write(d, "k.cu", "#include <cuda_fp16.h>\n#include \"cuda/std/cstdint\"\n");
  write(d, "toolkit/include/cuda_fp16.h", "// toolkit\n");
  write(d, "toolkit/include/cccl/cuda/std/cstdint", "// toolkit\n");
  ScopedCwd cwd(d);
  IncludeGraph g = resolve_includes("k.cu", *read_file("k.cu"),
                                    {{}, {"toolkit/include", "toolkit/include/cccl"}, {}});
  EXPECT_TRUE(g.headers.empty());
  EXPECT_TRUE(g.missing.empty());
  EXPECT_EQ(g.toolkit_includes, (std::vector<std::string>{"cuda/std/cstdint", "cuda_fp16.h"}));
}

TEST(ResolveIncludesTest, DashIOfAToolkitFolderStaysTheToolkits) {
  std::string d = test_dir();
  write(d, "k.cu", "#include <cub/cub.cuh>\n");
  write(d, "toolkit/include/cccl/cub/cub.cuh", "#include \"detail.cuh\"\n");
  ScopedCwd cwd(d);
  IncludeGraph g = resolve_includes("k.cu", *read_file("k.cu"),
                                    {{"./toolkit/include/cccl"}, {"toolkit/include/cccl"}, {}});
  EXPECT_TRUE(g.headers.empty());
  EXPECT_EQ(g.toolkit_includes, std::vector<std::string>{"cub/cub.cuh"});
}

TEST(ResolveIncludesTest, MissingIncludeGetsAStubNamingEveryFolderSearched) {
  std::string d = test_dir();
  write(d, "src/k.cu", "// one\n#ifdef NEVER\n#include \"gone.h\"\n#endif\n");
  ScopedCwd cwd(d);
  IncludeGraph g =
      resolve_includes("src/k.cu", *read_file("src/k.cu"), {{"inc"}, {"tk/include"}, {}});
  ASSERT_EQ(g.missing.size(), 1u);
  const MissingInclude& m = g.missing[0];
  EXPECT_EQ(m.name, "gone.h");
  EXPECT_EQ(m.included_from, "src/k.cu:3");
  EXPECT_EQ(m.searched, (std::vector<std::string>{"src", "inc", "tk/include"}));
  EXPECT_EQ(m.stub,
            "#error kcache: \"gone.h\" (included from src/k.cu:3) was not found in: src, inc, "
            "tk/include\n");
}

// Not handed, not stubbed, not a conflict: NVRTC never opens them.
TEST(ResolveIncludesTest, IncludesUnderIfZeroAreNotResolved) {
  std::string d = test_dir();
  write(d, "k.cu",
        "#include \"a/x.h\"\n#if 0\n#include \"debug.h\"\n#include \"gone.h\"\n#include "
        "\"util.h\"\n#endif\n");
  write(d, "a/x.h", "#include \"util.h\"\n#if 0\n#include \"trace.h\"\n#endif\n");
  write(d, "a/util.h", "// a's\n");
  write(d, "util.h", "// another util.h: would be a conflict if it were live\n");
  write(d, "debug.h", "// debug\n");
  write(d, "a/trace.h", "// trace\n");
  ScopedCwd cwd(d);
  IncludeGraph g = resolve_includes("k.cu", *read_file("k.cu"), {{}, {}, {}});
  EXPECT_EQ(header_names(g), (std::vector<std::string>{"a/x.h", "util.h"}));
  EXPECT_EQ(header(g, "util.h")->path, "a/util.h");
  EXPECT_TRUE(g.missing.empty());
}

TEST(ResolveIncludesTest, ProbedMissingHeaderGetsNoStub) {
  std::string d = test_dir();
  write(d, "k.cu", "#if __has_include(\"opt.h\")\n#include \"opt.h\"\n#endif\n");
  ScopedCwd cwd(d);
  IncludeGraph g = resolve_includes("k.cu", *read_file("k.cu"), {{}, {}, {}});
  ASSERT_EQ(g.missing.size(), 1u);
  EXPECT_TRUE(g.missing[0].stub.empty());
}

TEST(ResolveIncludesTest, IncludeCyclesEnd) {
  std::string d = test_dir();
  write(d, "k.cu", "#include \"a.h\"\n");
  write(d, "a.h", "#pragma once\n#include \"b.h\"\n");
  write(d, "b.h", "#pragma once\n#include \"a.h\"\n");
  ScopedCwd cwd(d);
  IncludeGraph g = resolve_includes("k.cu", *read_file("k.cu"), {{}, {}, {}});
  EXPECT_EQ(header_names(g), (std::vector<std::string>{"a.h", "b.h"}));
}

TEST(ResolveIncludesTest, UnreadableHeaderIsAnIoErrorNamingIt) {
  std::string d = test_dir();
  write(d, "k.cu", "#include \"dir.h\"\n");
  FileSystem::real().create_directories(d + "/dir.h", 0755);  // not a file: skipped
  write(d, "inc/dir.h", "// the real one\n");
  ScopedCwd cwd(d);
  IncludeGraph g = resolve_includes("k.cu", *read_file("k.cu"), {{"inc"}, {}, {}});
  EXPECT_EQ(header(g, "dir.h")->path, "inc/dir.h");
  if (::geteuid() == 0) GTEST_SKIP() << "root reads files whatever their mode";
  std::string locked = write(d, "locked/x.h", "// x\n");
  ASSERT_EQ(::chmod(locked.c_str(), 0), 0);
  write(d, "k2.cu", "#include \"locked/x.h\"\n");
  try {
    resolve_includes("k2.cu", *read_file("k2.cu"), {{}, {}, {}});
    FAIL() << "expected IoError";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("locked/x.h"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace kcache::compiler

namespace kcache::compiler {
namespace {

// NVRTC 13.0's own wording, as sealed compiles produce it (sealed_test).
TEST(ParseCannotOpenTest, ReadsTheNameTheIncluderTheLineAndTheQuoting) {
  std::optional<AskedInclude> a = parse_cannot_open(
      "warning first\nsrc/k.cu(12): catastrophic error: cannot open source file \"v7.cuh\"\n"
      "  #include STR(VARIANT.cuh)\n        ^\n\n1 catastrophic error detected in the "
      "compilation of \"src/k.cu\".\nCompilation terminated.\n");
  ASSERT_TRUE(a);
  EXPECT_EQ(a->name, "v7.cuh");
  EXPECT_EQ(a->includer, "src/k.cu");
  EXPECT_EQ(a->line, 12);
  EXPECT_FALSE(a->angled);
  a = parse_cannot_open(
      "a/h.cuh(2): catastrophic error: cannot open source file \"x.h\"\n  #include <x.h>\n");
  ASSERT_TRUE(a);
  EXPECT_EQ(a->includer, "a/h.cuh");
  EXPECT_TRUE(a->angled);
  a = parse_cannot_open(
      "v.cuh(1): catastrophic error: could not open source file \"w.cuh\" (no directories in "
      "search list)\n  #include_next <w.cuh>\n");
  ASSERT_TRUE(a);
  EXPECT_EQ(a->name, "w.cuh");
}

TEST(ParseCannotOpenTest, OtherErrorsAndGarbageAreNotAnAsk) {
  EXPECT_FALSE(parse_cannot_open(""));
  EXPECT_FALSE(parse_cannot_open("k.cu(3): error: identifier \"x\" is undefined\n"));
  EXPECT_FALSE(parse_cannot_open("): catastrophic error: cannot open source file \"x"));
  EXPECT_FALSE(parse_cannot_open("k.cu(x): catastrophic error: cannot open source file \"a\"\n"));
  EXPECT_FALSE(parse_cannot_open("k.cu(1): catastrophic error: cannot open source file \"\"\n"));
}

}  // namespace
}  // namespace kcache::compiler
