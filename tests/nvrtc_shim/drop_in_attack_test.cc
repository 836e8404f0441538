// Adversarial review of the drop-in libnvrtc: options with side effects,
// name expressions, in-memory headers, error paths and API misuse
// (nvrtc_attack.cc holds the cases). Each case runs with the real NVRTC and
// with the shim, a miss then a hit in a later process, in one working folder
// and then in another (the real NVRTC again there, and the shim, whose store
// then holds the first folder's entry): every answer must be the real
// NVRTC's, byte for byte. $KCACHE_SHIM_STATS says what the shim did.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <iostream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "common/file_system.h"
#include "compiler/toolkit.h"
#include "tests/testing/answer_files.h"
#include "tests/testing/run_command.h"
#include "tests/testing/temp_dir.h"

namespace kcache {
namespace {

using testing::answer_files;
using testing::AnswerFiles;
using testing::differences;
using testing::run_command;
using testing::runfile;
using testing::TempDir;

std::string folder_of(const std::string& path) { return path.substr(0, path.rfind('/')); }

// What differs between two runs of the real NVRTC itself: ptxas's
// "Compile time = 1.777 ms" and the process id in an automatic PCH's folder
// (/tmp/__nvrtc_auto_pch_769_0/), each made "#".
std::string without_timings(std::string log) {
  for (const std::string& before : {std::string("Compile time = "), std::string("__nvrtc_auto_pch_")}) {
    for (size_t at = log.find(before); at != std::string::npos; at = log.find(before, at + 1)) {
      size_t from = at + before.size(), to = from;
      while (to < log.size() && (isdigit(static_cast<unsigned char>(log[to])) || log[to] == '.')) ++to;
      log.replace(from, to - from, "#");
    }
  }
  return log;
}

// The answers a run wrote, its logs without ptxas's timings. Where a log
// held one, its size in the result codes ("log 0 614") varies with the
// timing's digits too, so that size is made "#" as well.
AnswerFiles files_of(const std::string& dir) {
  AnswerFiles out = answer_files(dir);
  std::set<std::string> timed;  // the cases whose log held a timing
  for (auto& [name, bytes] : out) {
    if (name.size() > 4 && name.compare(name.size() - 4, 4, ".log") == 0) {
      std::string plain = without_timings(bytes);
      if (plain != bytes) timed.insert(name.substr(0, name.find('.')));  // "Case.0.log"
      bytes = std::move(plain);
    }
  }
  for (auto& [name, bytes] : out) {
    if (name.size() <= 6 || name.compare(name.size() - 6, 6, ".codes") != 0 ||
        !timed.count(name.substr(0, name.find('.')))) {
      continue;
    }
    for (size_t at = bytes.find("\nlog "); at != std::string::npos; at = bytes.find("\nlog ", at + 1)) {
      size_t size = bytes.find(' ', at + 5);  // after the result code
      size_t end = bytes.find('\n', at + 1);
      if (size != std::string::npos && size < end) bytes.replace(size + 1, end - size - 1, "#");
    }
  }
  return out;
}

// "hit", "miss" or "real" of each stats line, and for real, why.
std::string kinds(const std::string& stats) {
  std::string out;
  size_t at = 0;
  while (at < stats.size()) {
    size_t end = stats.find('\n', at);
    std::string line = stats.substr(at, end == std::string::npos ? std::string::npos : end - at);
    std::string kind = line.substr(0, line.find(' '));
    if (kind == "real") {
      out += "real(" + line.substr(line.find(' ') + 1) + ") ";
    } else {
      out += kind + (line.find("not stored") != std::string::npos ? "(not stored)" : "") + " ";
    }
    at = end == std::string::npos ? stats.size() : end + 1;
  }
  return out.empty() ? "(none)" : out;
}

const std::vector<std::string> kCases = {
    "ArchTwiceSameValue",
    "CompileErrorEmptyName",
    "CompileErrorNullName",
    "CompileErrorNullNameUncachedOption",
    "CompileTwice",
    "ComputeArchPtxOnly",
    "CreatePch",
    "DefaultDevice",
    "DeviceC",
    "DeviceDebugG",
    "DeviceTimeTrace",
    "DeviceW",
    "DisplayErrorNumberWarning",
    "DlinkTimeOptLongSpelling",
    "DlinkTimeOptLongSpellingAbsoluteName",
    "DltoShortSpelling",
    "DltoWithGenOptLto",
    "ErrorInHeaderWithFolderName",
    "Ewp",
    "FailedCompileOutputs",
    "FmadLastWins",
    "GenOptLto",
    "GenOptLtoLong",
    "HeaderAbsoluteNameShadowsDisk",
    "HeaderEmptyName",
    "HeaderNamedWithDotDot",
    "HeaderNeverIncluded",
    "HeaderNullName",
    "HeaderSameNameTwiceDifferentContent",
    "HeaderShadowsDiskHeader",
    "IncludeFolderMissing",
    "InstantiateTemplatesInPchAlone",
    "LineInfo",
    "LogSizeOfWarningsOnHit",
    "LoweredNamesOfAFailedCompile",
    "Minimal",
    "MisuseBeforeCompile",
    "NameAfterCompileAndNullLowered",
    "NameNotAddedLookedUp",
    "NameThatDoesNotExist",
    "NameTwice",
    "NamesOverloadsAndTemplates",
    "NamesReversedOrder",
    "NoArch",
    "NoSourceInclude",
    "NullPointersAfterCompile",
    "OfastCompileMax",
    "OptInfoInline",
    "PchAuto",
    "PchHeapSizeRequiredAfterCompile",
    "PchQueriesBeforeCompile",
    "PtxasOptionsSeparateLooksLikeDefine",
    "RdcTrue",
    "SplitCompile",
    "StdCxx20",
    "SyntaxOnly",
    "TimeFile",
    "UnknownOption",
    "UseFastMath",
    "UseFastMathTwice",
    "WarningNullNameUncachedOption",
    "WarningWithFolderName",
    "XptxasSeparate",
    "XptxasSeparateBeforeInclude",
    "XptxasVerbose",
};

class DropInAttackTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    real_dir_ = folder_of(compiler::find_toolkit("").nvrtc.path);
    shim_dir_ = folder_of(runfile("nvrtc_shim/libnvrtc.so.13"));
    scratch_ = tmp_ / "scratch";
    for (const std::string& d : {scratch_, scratch_ + "/inc", scratch_ + "/src", scratch_ + "/dir",
                                 tmp_ / "cwd_a", tmp_ / "the_other_working_folder"}) {
      ::mkdir(d.c_str(), 0755);
    }
    write_file_atomically(scratch_ + "/inc/shadow.h", "#define SHADOW 9\n");
    write_file_atomically(scratch_ + "/up.h", "#define UP 8\n");
    write_file_atomically(scratch_ + "/src/beside.h", "#define BESIDE 4\n");
  }

  // Runs the case with the real NVRTC or the shim in `cwd`; returns what it
  // wrote. `stats` names the stats file (shim only).
  std::map<std::string, std::string> run(bool shim, const std::string& cwd,
                                         const std::string& stats = "") {
    for (const char* f : {"time.csv", "trace.json", "trace.json.json", "mine.pch"}) {
      ::unlink((scratch_ + "/" + f).c_str());
    }
    std::string out = tmp_ / ("out" + std::to_string(runs_++));
    ::mkdir(out.c_str(), 0755);
    testing::CommandResult r = run_command(
        {runfile("tests/nvrtc_shim/nvrtc_attack"), out, GetParam()},
        {{"LD_LIBRARY_PATH", shim ? shim_dir_ + ":" + real_dir_ : real_dir_},
         {"KCACHE_DIR", tmp_ / "store"},
         {"KCACHE_SHIM_STATS", stats.empty() ? "" : tmp_ / stats},
         {"KCACHE_REMOTE", ""},
         {"KCACHE_QUIET", "1"},
         {"ATTACK_DIR", scratch_},
         {"ATTACK_CWD", cwd}});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return files_of(out);
  }

  std::string stats(const std::string& name) { return read_file(tmp_ / name).value_or(""); }

  TempDir tmp_;
  std::string real_dir_, shim_dir_, scratch_;
  int runs_ = 0;
};

TEST_P(DropInAttackTest, AnswersAreNvrtcsOnAMissAndOnAHit) {
  const std::string a = tmp_ / "cwd_a", b = tmp_ / "the_other_working_folder";
  std::map<std::string, std::string> want_a = run(false, a);
  ASSERT_EQ(want_a.count(GetParam() + ".codes"), 1u);
  std::map<std::string, std::string> miss = run(true, a, "miss");
  std::map<std::string, std::string> hit = run(true, a, "hit");
  std::map<std::string, std::string> want_b = run(false, b);
  std::map<std::string, std::string> other = run(true, b, "other");
  std::string miss_diff = differences(miss, want_a), hit_diff = differences(hit, want_a),
              other_diff = differences(other, want_b);
  // One line per case for the report.
  std::cout << "CASE " << GetParam() << " | first: " << kinds(stats("miss"))
            << "| second: " << kinds(stats("hit")) << "| other folder: " << kinds(stats("other"))
            << "| miss " << (miss_diff.empty() ? "equal" : "DIFFERENT") << " | hit "
            << (hit_diff.empty() ? "equal" : "DIFFERENT") << " | other folder "
            << (other_diff.empty() ? "equal" : "DIFFERENT") << "\n";
  EXPECT_EQ(miss_diff, "") << "the first run (miss) differs from NVRTC; stats: " << stats("miss");
  EXPECT_EQ(hit_diff, "") << "the second run (hit) differs from NVRTC; stats: " << stats("hit");
  EXPECT_EQ(other_diff, "") << "another working folder differs from NVRTC there; stats: "
                            << stats("other");
}

TEST(DropInAttackCases, TheListIsTheProgramsList) {
  testing::CommandResult r = run_command({runfile("tests/nvrtc_shim/nvrtc_attack"), "/", "--list"});
  std::string want;
  for (const std::string& c : kCases) want += c + "\n";
  EXPECT_EQ(r.out, want);
}

INSTANTIATE_TEST_SUITE_P(Cases, DropInAttackTest, ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param;
                         });

}  // namespace
}  // namespace kcache
