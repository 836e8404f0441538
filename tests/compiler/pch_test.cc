// NVRTC's precompiled headers as kcache uses them in long-lived processes:
// the image is byte-identical to a plain compile, a PCH really is made (so the
// speed-up is real), a wrong source fails with the plain compile's log, and
// NVRTC's PCH chatter is removed from logs without touching real diagnostics.
#include "compiler/pch.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "common/error.h"
#include "common/file_system.h"
#include "compiler/toolkit.h"
#include "tests/compiler/test_files.h"

namespace kcache::compiler {
namespace {

// The processes that use PCH point TMPDIR at the PCH folder: NVRTC writes its
// PCH work files there, and the seal lets it write nowhere else. NVRTC
// refuses a long one ("name of directory for temporary files is too long"),
// as Bazel's test folders are, so the folder is a short one under /tmp.
std::string test_dir() {
  std::string dir = "/tmp/kcache-pch-test-XXXXXX";
  if (!::mkdtemp(&dir[0])) ADD_FAILURE() << "mkdtemp failed";
  ::setenv("TMPDIR", dir.c_str(), 1);
  return dir;
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

NvrtcInput cub_input(const Toolkit& t, const std::string& kernel_name) {
  NvrtcInput in;
  in.source_name = "tests/compiler/kernels/cub_block.cu";
  in.source = *read_file(in.source_name);
  in.source.replace(in.source.find("sort_and_sum"), 12, kernel_name);
  in.options = {"-arch=sm_90", "-std=c++17"};
  for (const std::string& d : t.include_dirs) in.options.push_back("-I" + d);
  return in;
}

int pch_files(const std::string& dir) {
  int n = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    n += e.path().extension() == ".pch";
  }
  return n;
}

TEST(PchTest, ImagesAreByteIdenticalToAPlainCompileAndAPchIsMade) {
  std::string dir = test_dir();
  Toolkit t = find_toolkit("");
  const Nvrtc& nvrtc = Nvrtc::open(t.nvrtc.path);
  for (const char* name : {"first_kernel", "second_kernel"}) {
    NvrtcInput in = cub_input(t, name);
    NvrtcOutput with_pch = compile_with_pch(nvrtc, in, dir);
    NvrtcOutput plain = nvrtc.compile(in);
    EXPECT_EQ(with_pch.image, plain.image) << name;
    EXPECT_EQ(with_pch.log, plain.log) << name;
  }
  EXPECT_EQ(pch_files(dir), 1) << "the second kernel shares the first one's header prefix";
}

TEST(PchTest, AWrongSourceFailsWithThePlainCompilesLogAndOptions) {
  std::string dir = test_dir();
  Toolkit t = find_toolkit("");
  NvrtcInput in = cub_input(t, "broken_kernel");
  in.source += "\nint broken = undeclared_variable;\n";
  try {
    compile_with_pch(Nvrtc::open(t.nvrtc.path), in, dir);
    FAIL() << "compiled a broken source";
  } catch (const CompileError& e) {
    EXPECT_TRUE(contains(e.log(), "identifier \"undeclared_variable\" is undefined")) << e.log();
    EXPECT_FALSE(contains(e.log(), "precompiled header")) << e.log();
    EXPECT_EQ(e.options(), in.options);
  }
}

TEST(PchTest, StripRemovesNvrtcsPchMessagesOnly) {
  const std::string dir = "/tmp/kcache-worker-abc/pch";
  // As NVRTC 13.0 writes them (captured from real compiles).
  std::string log =
      "\"k.cu\": creating precompiled header file \"" + dir + "/k_0.pch\"\n" +
      "\"other/m.cu\": using precompiled header file \"" + dir + "/k_0.pch\"\n" +
      "Warning #629-D: the command line options do not match those used when precompiled "
      "header file \"" +
      dir + "/k_0.pch\" was created\n\n" +
      "Remark: The warnings can be suppressed with \"-diag-suppress <warning-number>\"\n\n" +
      " warning: PCH heap reset failed, precompiled header processing may not work as expected\n";
  EXPECT_EQ(strip_pch_messages(log, dir), "");

  std::string real =
      "k.cu(3): warning #177-D: variable \"x\" was declared but never referenced\n"
      "    int x;\n"
      "        ^\n\n"
      "Remark: The warnings can be suppressed with \"-diag-suppress <warning-number>\"\n\n";
  EXPECT_EQ(strip_pch_messages(real, dir), real);
  EXPECT_EQ(strip_pch_messages(log + real, dir), real);
  // A status line naming some other folder is not ours.
  std::string foreign = "\"k.cu\": using precompiled header file \"/elsewhere/k_0.pch\"\n";
  EXPECT_EQ(strip_pch_messages(foreign, dir), foreign);
  EXPECT_EQ(strip_pch_messages("no newline at the end", dir), "no newline at the end");
}

}  // namespace
}  // namespace kcache::compiler
