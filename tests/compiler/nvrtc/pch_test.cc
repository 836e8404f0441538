// NVRTC's precompiled headers as kcache uses them in long-lived processes:
// the image is byte-identical to a plain compile, a PCH really is made (so the
// speed-up is real), a wrong source fails with the plain compile's log, and
// NVRTC's PCH chatter is removed from logs without touching real diagnostics.
#include "compiler/nvrtc/pch.h"

#include <gtest/gtest.h>

#include <sys/stat.h>

#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <map>

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

// A small prefix (libcu++'s limits) and a header handed in memory that
// `base_h` fills; the kernel reads what the header defines.
NvrtcInput named_input(const Toolkit& t, const std::string& source_name,
                       const std::string& base_h) {
  NvrtcInput in;
  in.source_name = source_name;
  in.source =
      "#include \"base.h\"\n#include <cuda/std/limits>\n"
      "extern \"C\" __global__ void k(char* o) { o[0] = base_file[0]; }\n";
  in.headers = {{"base.h", base_h}};
  in.options = {"-arch=compute_80", "-std=c++17"};
  for (const std::string& d : t.include_dirs) in.options.push_back("-I" + d);
  in.want_cubin = false;
  return in;
}

struct PchFile {
  std::string name;
  uintmax_t ino = 0;
  int64_t mtime_ns = 0;
  bool operator==(const PchFile& o) const {
    return name == o.name && ino == o.ino && mtime_ns == o.mtime_ns;
  }
};

// The one PCH file in `dir` (a test fails if there are more or none).
PchFile the_pch(const std::string& dir) {
  std::vector<PchFile> found;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (e.path().extension() != ".pch") continue;
    struct stat st;
    EXPECT_EQ(::stat(e.path().c_str(), &st), 0);
    found.push_back({e.path().filename(), st.st_ino,
                     static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec});
  }
  EXPECT_EQ(found.size(), 1u);
  return found.empty() ? PchFile{} : found.front();
}

// A prefix that freezes nothing from its maker serves every source with the
// same prefix and options: prewarm's speed-up stays.
TEST(PchTest, APchThatFrozeNothingServesOtherSources) {
  std::string dir = test_dir();
  Toolkit t = find_toolkit("");
  const Nvrtc& nvrtc = Nvrtc::open(t.nvrtc.path);
  const std::string base = "__device__ char base_file[] = \"fixed\";\n";
  NvrtcOutput first = compile_with_pch(nvrtc, named_input(t, "first.cu", base), dir);
  PchFile made = the_pch(dir);
  NvrtcOutput second = compile_with_pch(nvrtc, named_input(t, "second.cu", base), dir);
  EXPECT_EQ(second.image, nvrtc.compile(named_input(t, "second.cu", base)).image);
  EXPECT_EQ(the_pch(dir), made) << "the PCH was made again: not shared";
}

// __BASE_FILE__ in a header of the prefix is the maker's source name, frozen
// in the PCH (issue 27): another source must not use it.
TEST(PchTest, APchThatFrozeItsMakersBaseFileServesOnlyThatSource) {
  std::string dir = test_dir();
  Toolkit t = find_toolkit("");
  const Nvrtc& nvrtc = Nvrtc::open(t.nvrtc.path);
  const std::string base = "__device__ char base_file[] = __BASE_FILE__;\n";
  for (const char* name : {"first.cu", "second.cu", "first.cu", "third.cu"}) {
    NvrtcInput in = named_input(t, name, base);
    NvrtcOutput with_pch = compile_with_pch(nvrtc, in, dir);
    NvrtcOutput plain = nvrtc.compile(in);
    EXPECT_EQ(with_pch.image, plain.image) << name;
    EXPECT_NE(with_pch.image.find("base_file[" + std::to_string(std::string(name).size() + 1)),
              std::string::npos)
        << name << ":\n" << with_pch.image;
  }
}

std::time_t day_one() { return 1795000000; }          // 2026-11-17
std::time_t day_two() { return 1795000000 + 86400; }  // the day after

// NVRTC 13 makes no PCH whose prefix expands __DATE__ or __TIME__ (measured:
// warning #20283-D "PCH creation disabled because macro "__DATE__" was
// encountered"), so a date cannot be frozen that way today. kcache does not
// rely on it: a PCH whose maker's inputs name __DATE__ at all (here a macro
// defined but not expanded in the prefix, which NVRTC does precompile)
// serves compiles of the same day only (the clock turned at midnight).
TEST(PchTest, APchWhoseMakerNamedTheDateServesOnlyThatDay) {
  std::string dir = test_dir();
  Toolkit t = find_toolkit("");
  const Nvrtc& nvrtc = Nvrtc::open(t.nvrtc.path);
  const std::string expanded = "__device__ char base_file[] = __DATE__;\n";
  NvrtcOutput out = compile_with_pch(nvrtc, named_input(t, "first.cu", expanded), dir);
  EXPECT_EQ(pch_files(dir), 0) << "NVRTC made a PCH that froze __DATE__";
  EXPECT_EQ(out.image, nvrtc.compile(named_input(t, "first.cu", expanded)).image);

  const std::string named = "#define WHEN __DATE__\n__device__ char base_file[] = \"fixed\";\n";
  set_pch_clock_for_testing(&day_one);
  compile_with_pch(nvrtc, named_input(t, "first.cu", named), dir);
  PchFile made = the_pch(dir);
  compile_with_pch(nvrtc, named_input(t, "second.cu", named), dir);
  EXPECT_EQ(the_pch(dir), made) << "the same day: the PCH serves";
  set_pch_clock_for_testing(&day_two);
  NvrtcOutput next_day = compile_with_pch(nvrtc, named_input(t, "first.cu", named), dir);
  set_pch_clock_for_testing(nullptr);
  EXPECT_FALSE(the_pch(dir) == made) << "the next day used the PCH made the day before";
  EXPECT_EQ(next_day.image, nvrtc.compile(named_input(t, "first.cu", named)).image);
}

// Served compiles (NvrtcInput::serve_disk) of sources in `src` whose prefix
// includes frozen.h from that folder: NVRTC that uses a PCH opens none of
// the headers it froze, so the seal serves them to the maker only.
NvrtcInput served_input(const Toolkit& t, const std::string& src, const std::string& name) {
  NvrtcInput in;
  in.source_name = src + "/" + name + ".cu";
  in.source = "#include \"frozen.h\"\n#include <cuda/std/limits>\n"
              "extern \"C\" __global__ void " + name + "(int* o) { o[0] = frozen_value; }\n";
  in.options = {"-arch=compute_80", "-std=c++17"};
  for (const std::string& d : t.include_dirs) in.options.push_back("-I" + d);
  in.want_cubin = false;
  in.serve_disk = true;
  in.working_dir = src;
  return in;
}

std::string source_dir(const std::string& value) {
  std::string src = "/tmp/kcache-pch-src-XXXXXX";
  if (!::mkdtemp(&src[0])) ADD_FAILURE() << "mkdtemp failed";
  testing::write(src, "frozen.h", "__device__ int frozen_value = " + value + ";\n");
  return src;
}

// Every file served, by name, with its bytes' hash: what a served key holds.
std::map<std::string, std::string> served_files(const NvrtcOutput& out) {
  std::map<std::string, std::string> files;
  for (const ServedFile& f : out.served) files[f.path] = f.content.hex();
  return files;
}

// A compile that used a PCH reads the same files as a plain compile, though
// NVRTC opened none of the prefix's: the key covers the frozen headers.
TEST(PchTest, AServedCompileThatUsesAPchIsServedTheHeadersThePchFroze) {
  std::string dir = test_dir();
  std::string src = source_dir("1");
  Toolkit t = find_toolkit("");
  const Nvrtc& nvrtc = Nvrtc::open(t.nvrtc.path);
  compile_with_pch(nvrtc, served_input(t, src, "maker"), dir);
  int uses = pch_uses_for_testing();
  NvrtcOutput user = compile_with_pch(nvrtc, served_input(t, src, "user"), dir);
  ASSERT_EQ(pch_uses_for_testing(), uses + 1) << "the user did not use the maker's PCH";
  NvrtcOutput plain = nvrtc.compile(served_input(t, src, "user"));
  EXPECT_EQ(user.image, plain.image);
  EXPECT_EQ(user.log, plain.log);
  EXPECT_EQ(served_files(user), served_files(plain));
  EXPECT_EQ(served_files(user).count(src + "/frozen.h"), 1u);
}

// A header the PCH froze, changed after it was made: the PCH is dropped, and
// the next compile (in the same process) gives the new header's output.
TEST(PchTest, AServedHeaderChangedSinceThePchWasMadeDropsIt) {
  std::string dir = test_dir();
  std::string src = source_dir("1");
  Toolkit t = find_toolkit("");
  const Nvrtc& nvrtc = Nvrtc::open(t.nvrtc.path);
  compile_with_pch(nvrtc, served_input(t, src, "maker"), dir);
  PchFile made = the_pch(dir);
  NvrtcOutput before = compile_with_pch(nvrtc, served_input(t, src, "user"), dir);
  testing::write(src, "frozen.h", "__device__ int frozen_value = 22;\n");
  NvrtcOutput after = compile_with_pch(nvrtc, served_input(t, src, "user"), dir);
  NvrtcOutput plain = nvrtc.compile(served_input(t, src, "user"));
  EXPECT_EQ(after.image, plain.image) << "the user got the header the PCH froze";
  EXPECT_NE(after.image, before.image);
  EXPECT_EQ(served_files(after), served_files(plain));
  EXPECT_FALSE(the_pch(dir) == made) << "the stale PCH was kept";
}

// A maker that reads a file past its leading directives would lend that
// file to every user's key (and a Bazel action declares only its own): its
// PCH is not kept, and the user's reads are a plain compile's.
TEST(PchTest, AServedMakerThatIncludesPastItsDirectivesLendsNoPch) {
  std::string dir = test_dir();
  std::string src = source_dir("1");
  testing::write(src, "extra.h", "__device__ int extra_value = 3;\n");
  Toolkit t = find_toolkit("");
  const Nvrtc& nvrtc = Nvrtc::open(t.nvrtc.path);
  NvrtcInput maker = served_input(t, src, "maker");
  maker.source += "#include \"extra.h\"\n";
  compile_with_pch(nvrtc, maker, dir);
  int uses = pch_uses_for_testing();
  NvrtcOutput user = compile_with_pch(nvrtc, served_input(t, src, "user"), dir);
  EXPECT_EQ(pch_uses_for_testing(), uses) << "the user used the PCH of a maker that read extra.h";
  EXPECT_EQ(served_files(user), served_files(nvrtc.compile(served_input(t, src, "user"))));
  EXPECT_EQ(served_files(user).count(src + "/extra.h"), 0u);
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
