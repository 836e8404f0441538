// The drop-in's served disk (seal.h, SealPolicy::serve) through its path
// (compile_program) for a program in the working folder, whose entries other
// folders share: "-I ." and its spellings, "-I ..", files beside the program
// appearing or absent, names climbing out of it, NVRTC's own names as user
// files, the working folder reached through a moving link. Every answer must
// be the real NVRTC's from the disk as it is at that moment.
#include <gtest/gtest.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "common/error.h"
#include "tests/compiler/program_vs_nvrtc.h"

namespace kcache::compiler {
namespace {

using testing::InFolder;
using testing::kKernel;

class ServedWorkingFolderTest : public testing::ProgramVsNvrtcTest {
 protected:
  // The program compiled twice with working folder `a` as `name_a` (a miss,
  // then its entry), then with working folder `b` as `name_b`: each time
  // NVRTC's own answer there (folders and names relative to the test's).
  void made_in_a_asked_in_b(const std::string& source, const std::vector<std::string>& options,
                            const std::string& a, const std::string& name_a, const std::string& b,
                            const std::string& name_b) {
    {
      InFolder in(dir_ / a);
      expect_nvrtcs_answer(source, dir_ / name_a, options);
      expect_nvrtcs_answer(source, dir_ / name_a, options);
    }
    InFolder in(dir_ / b);
    expect_nvrtcs_answer(source, dir_ / name_b, options);
  }
};

// The include's name is made by token pasting: only NVRTC knows it.
const char kComputed[] = "#define STR(x) #x\n#define XSTR(x) STR(x)\n";

// C3. A program in the working folder with "-I .": NVRTC takes the include
// from the working folder, which the second compile names by the same
// absolute name (kept absolute: NotTheFolders). In another folder "-I ."
// is that folder.
TEST_F(ServedWorkingFolderTest, IncludeDotWithAProgramInTheWorkingFolder) {
  write("a/i.h", "#define VALUE 1\n");
  write("b/i.h", "#define VALUE 2\n");
  const std::string source = "#include <i.h>\n" + std::string(kKernel);
  const std::vector<std::string> options = {"-arch=sm_90", "-I."};
  made_in_a_asked_in_b(source, options, "a", "a/k.cu", "b", "b/k.cu");  // b's i.h: VALUE 2
}

// C4. "-I .." with a program in the working folder, folders at two depths.
TEST_F(ServedWorkingFolderTest, IncludeDotDotWithAProgramInTheWorkingFolder) {
  write("i.h", "#define VALUE 1\n");
  write("x/i.h", "#define VALUE 2\n");
  write("a/.keep", "");
  write("x/b/.keep", "");
  const std::string source = "#include <i.h>\n" + std::string(kKernel);
  const std::vector<std::string> options = {"-arch=sm_90", "-I.."};
  made_in_a_asked_in_b(source, options, "a", "a/k.cu", "x/b", "x/b/k.cu");  // x/i.h: VALUE 2
}

// C5. "-I ." where the include is absent in the first folder (found by a
// later -I), present in the second.
TEST_F(ServedWorkingFolderTest, IncludeDotAbsentThenPresentInAnotherFolder) {
  write("a/.keep", "");
  write("inc/i.h", "#define VALUE 1\n");
  write("b/i.h", "#define VALUE 2\n");
  const std::string source = "#include <i.h>\n" + std::string(kKernel);
  const std::vector<std::string> options = {"-arch=sm_90", "-I.", "-I" + dir_ / "inc"};
  made_in_a_asked_in_b(source, options, "a", "a/k.cu", "b", "b/k.cu");  // b's i.h: VALUE 2
}

// C6. __has_include of a name beside a program in the working folder, absent
// in a, present in b.
TEST_F(ServedWorkingFolderTest, HasIncludeBesideAProgramInTheWorkingFolder) {
  write("a/.keep", "");
  write("b/flag.h", "\n");
  const std::string source =
      "#if __has_include(\"flag.h\")\n#define VALUE 2\n#else\n#define VALUE 1\n#endif\n" +
      std::string(kKernel);
  const std::vector<std::string> options = {"-arch=sm_90"};
  made_in_a_asked_in_b(source, options, "a", "a/k.cu", "b", "b/k.cu");
}

// C8. A program in the working folder including "../y.h" (absent above a,
// found in an -I), then in a folder at another depth where ../y.h exists.
TEST_F(ServedWorkingFolderTest, ProgramInTheWorkingFolderClimbsOut) {
  write("a/.keep", "");
  write("x/b/.keep", "");
  write("inc/y.h", "#define VALUE 1\n");
  write("x/y.h", "#define VALUE 2\n");
  const std::string source = "#include \"../y.h\"\n" + std::string(kKernel);
  const std::vector<std::string> options = {"-arch=sm_90", "-I" + dir_ / "inc/q"};
  write("inc/q/.keep", "");
  made_in_a_asked_in_b(source, options, "a", "a/k.cu", "x/b", "x/b/k.cu");  // x/y.h: VALUE 2
}

// C9. The program in the working folder, but named relatively with "./":
// and the working folder reached through a link that moves.
TEST_F(ServedWorkingFolderTest, WorkingFolderThroughAMovingLinkWithQuotedInclude) {
  write("t1/h.h", "#define VALUE 1\n");
  write("t2/h.h", "#define VALUE 2\n");
  ASSERT_EQ(::symlink((dir_ / "t1").c_str(), (dir_ / "w").c_str()), 0);
  const std::string source = "#include \"h.h\"\n" + std::string(kKernel);
  {
    InFolder in(dir_ / "w");
    expect_nvrtcs_answer(source, dir_ / "w/k.cu", {"-arch=sm_90"});
    expect_nvrtcs_answer(source, dir_ / "w/k.cu", {"-arch=sm_90"});
  }
  ASSERT_EQ(::unlink((dir_ / "w").c_str()), 0);
  ASSERT_EQ(::symlink((dir_ / "t2").c_str(), (dir_ / "w").c_str()), 0);
  InFolder in(dir_ / "w");
  expect_nvrtcs_answer(source, dir_ / "w/k.cu", {"-arch=sm_90"});
}

// C10. NVRTC's own names in the working folder (__nv_nvrtc_builtin_header.h,
// __nv_name_map) are keyed by their absolute names in folder a (NotTheFolders);
// in folder b a user's file by that name sits in the working folder.
TEST_F(ServedWorkingFolderTest, NvrtcsOwnNamesInAnotherWorkingFolder) {
  write("a/.keep", "");
  write("b/__nv_nvrtc_builtin_header.h", "#define VALUE 7\n");
  write("b/__nv_name_map", "#define VALUE 8\n");
  const std::string source = "#ifndef VALUE\n#define VALUE 1\n#endif\n" + std::string(kKernel);
  const std::vector<std::string> options = {"-arch=sm_90"};
  made_in_a_asked_in_b(source, options, "a", "a/k.cu", "b", "b/k.cu");
}

// C11. The same for a program outside the working folder (the working
// folder changes, the program's name does not).
TEST_F(ServedWorkingFolderTest, NvrtcsOwnNamesWithAProgramElsewhere) {
  write("a/.keep", "");
  write("b/__nv_nvrtc_builtin_header.h", "#define VALUE 7\n");
  write("b/__nv_name_map", "#define VALUE 8\n");
  const std::string source = "#ifndef VALUE\n#define VALUE 1\n#endif\n" + std::string(kKernel);
  const std::vector<std::string> options = {"-arch=sm_90"};
  made_in_a_asked_in_b(source, options, "a", "src/k.cu", "b", "src/k.cu");
}

// C12. A quoted include beside a program in the working folder where a's copy
// is a link into an -I folder (the same file by two names).
TEST_F(ServedWorkingFolderTest, BesideIsALinkToAnIncludeFolderFile) {
  write("inc/h.h", "#define VALUE 1\n");
  write("b/h.h", "#define VALUE 2\n");
  write("a/.keep", "");
  ASSERT_EQ(::symlink((dir_ / "inc/h.h").c_str(), (dir_ / "a/h.h").c_str()), 0);
  const std::string source = "#include \"h.h\"\n" + std::string(kKernel);
  const std::vector<std::string> options = {"-arch=sm_90", "-I" + dir_ / "inc"};
  made_in_a_asked_in_b(source, options, "a", "a/k.cu", "b", "b/k.cu");  // b/h.h: VALUE 2
}

// C13. -I of the working folder's parent plus a quoted include spelled with
// the folder's own name: "a/h.h" from -I dir_ names a's file absolutely.
TEST_F(ServedWorkingFolderTest, IncludeFolderAboveTheWorkingFolder) {
  write("a/h.h", "#define VALUE 1\n");
  write("b/h.h", "#define VALUE 2\n");
  const std::string source = std::string(kComputed) +
                             "#define H(n) STR(n.h)\n#include H(h)\n" + std::string(kKernel);
  const std::vector<std::string> options = {"-arch=sm_90", "-I" + dir_ / "a"};
  {
    InFolder in(dir_ / "a");
    expect_nvrtcs_answer(source, dir_ / "a/k.cu", options);
    expect_nvrtcs_answer(source, dir_ / "a/k.cu", options);
  }
  write("b/h.h", "#define VALUE 3\n");
  InFolder in(dir_ / "b");
  expect_nvrtcs_answer(source, dir_ / "b/k.cu", options);  // b/h.h beside: VALUE 3
}

// C14. Program in the working folder, computed quoted include absent beside
// it in a and found in -I inc; in b the file beside the program appears.
TEST_F(ServedWorkingFolderTest, ComputedBesideAbsentThenPresent) {
  write("a/.keep", "");
  write("inc/h.h", "#define VALUE 1\n");
  write("b/h.h", "#define VALUE 2\n");
  const std::string source = std::string(kComputed) +
                             "#define H(n) STR(n.h)\n#include H(h)\n" + std::string(kKernel);
  const std::vector<std::string> options = {"-arch=sm_90", "-I" + dir_ / "inc"};
  made_in_a_asked_in_b(source, options, "a", "a/k.cu", "b", "b/k.cu");  // VALUE 2
}

// (--pre-include=pre.h and -include pre.h were tried too: program_options
// refuses them, "it includes a file kcache does not hand", so the drop-in
// hands them to the real NVRTC.)
// C15-C17. Options naming a file or folder relative to the working folder,
// spelled in ways other than "-I.", with a program in the working folder.
void InFoldersAThenB(testing::ProgramVsNvrtcTest* /*t*/, const std::string& a, const std::string& b,
                     const std::string& source, const std::vector<std::string>& options,
                     const std::function<bool(const std::string&, const std::string&,
                                              const std::vector<std::string>&)>& check) {
  {
    InFolder in(a);
    check(source, a + "/k.cu", options);
    check(source, a + "/k.cu", options);
  }
  InFolder in(b);
  check(source, b + "/k.cu", options);
}

#define CHECK_FN [this](const std::string& s, const std::string& n, const std::vector<std::string>& o) { return expect_nvrtcs_answer(s, n, o); }

TEST_F(ServedWorkingFolderTest, LongIncludePathDotWithAProgramInTheWorkingFolder) {
  write("a/i.h", "#define VALUE 1\n");
  write("b/i.h", "#define VALUE 2\n");
  InFoldersAThenB(this, dir_ / "a", dir_ / "b", "#include <i.h>\n" + std::string(kKernel),
                  {"-arch=sm_90", "--include-path=."}, CHECK_FN);
}

TEST_F(ServedWorkingFolderTest, SeparateIncludeDotWithAProgramInTheWorkingFolder) {
  write("a/i.h", "#define VALUE 1\n");
  write("b/i.h", "#define VALUE 2\n");
  InFoldersAThenB(this, dir_ / "a", dir_ / "b", "#include <i.h>\n" + std::string(kKernel),
                  {"-arch=sm_90", "-I", "."}, CHECK_FN);
}

TEST_F(ServedWorkingFolderTest, IncludeEmptyRelativeSubfolderWithAProgramInTheWorkingFolder) {
  write("a/sub/i.h", "#define VALUE 1\n");
  write("b/sub/i.h", "#define VALUE 2\n");
  InFoldersAThenB(this, dir_ / "a", dir_ / "b", "#include <i.h>\n" + std::string(kKernel),
                  {"-arch=sm_90", "-Isub/"}, CHECK_FN);
}

}  // namespace
}  // namespace kcache::compiler
