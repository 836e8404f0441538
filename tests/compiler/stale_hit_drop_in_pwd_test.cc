// The drop-in libnvrtc through its compile processes, where the host's $PWD
// names its working folder through a link: NVRTC writes $PWD's spelling into
// a -lineinfo output (stale_hit_pwd_spelling_test measures it in one
// process), so the drop-in's answer, a miss and then a hit, must hold the
// host's spelling, as the real NVRTC's does in that host. pwd_host compiles
// with the $PWD it started with, then after setting $PWD to another link.
#include <gtest/gtest.h>
#include <unistd.h>

#include <map>
#include <string>

#include "common/file_system.h"
#include "compiler/toolkit.h"
#include "tests/testing/run_command.h"
#include "tests/testing/temp_dir.h"

namespace kcache {
namespace {

using testing::run_command;
using testing::runfile;
using testing::TempDir;

std::string folder_of(const std::string& path) { return path.substr(0, path.rfind('/')); }

// Each `.file` line of the PTX pwd_host wrote, then the whole text.
std::string files_named(const std::string& ptx) {
  std::string out;
  for (size_t at = ptx.find(".file"); at != std::string::npos; at = ptx.find(".file", at + 1)) {
    out += ptx.substr(at, ptx.find('\n', at) - at) + "\n";
  }
  return out;
}

class StaleHitDropInPwdTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(::mkdir((tmp_ / "real").c_str(), 0755), 0);
    ASSERT_EQ(::symlink((tmp_ / "real").c_str(), (tmp_ / "l1").c_str()), 0);
    ASSERT_EQ(::symlink((tmp_ / "real").c_str(), (tmp_ / "l2").c_str()), 0);
  }

  // pwd_host started in l1 by a shell (so $PWD is l1), with the real NVRTC
  // or the drop-in; what it wrote.
  std::string run(const std::string& which) {
    const bool shim = which != "real";
    const std::string out = tmp_ / ("out_" + which), tmpdir = tmp_ / ("tmp_" + which);
    ::mkdir(tmpdir.c_str(), 0755);
    const std::string real_dir = folder_of(compiler::find_toolkit("").nvrtc.path);
    const std::string shim_dir = folder_of(runfile("nvrtc_shim/libnvrtc.so.13"));
    std::map<std::string, std::string> env = {
        {"LD_LIBRARY_PATH", shim ? shim_dir + ":" + real_dir : real_dir},
        {"KCACHE_DIR", tmp_ / "store"},
        {"KCACHE_EXE", runfile("cli/kcache")},
        {"KCACHE_SHIM_STATS", tmp_ / ("stats_" + which)},
        {"KCACHE_REMOTE", ""},
        {"TMPDIR", tmpdir},
    };
    testing::CommandResult c =
        run_command({"/bin/sh", "-c", "cd \"$1\" && exec \"$2\" \"$3\" \"$4\"", "sh", tmp_ / "l1",
                     runfile("tests/compiler/pwd_host"), out, tmp_ / "l2"},
                    env);
    EXPECT_EQ(c.exit_code, 0) << which << ": " << c.err;
    std::fprintf(stderr, "[%s] stats:\n%s\n", which.c_str(),
                 read_file(tmp_ / ("stats_" + which)).value_or("").c_str());
    return read_file(out).value_or("(nothing written)");
  }

  TempDir tmp_;
};

TEST_F(StaleHitDropInPwdTest, TheHostsPwdSpellingIsTheDropInsLineInfoOutput) {
  const std::string real = run("real");
  ASSERT_NE(files_named(real).find(tmp_ / "l1/kern.cu"), std::string::npos) << files_named(real);
  for (const char* which : {"miss", "hit"}) {
    const std::string got = run(which);
    EXPECT_EQ(files_named(got), files_named(real)) << which;
    EXPECT_EQ(got, real) << which << ": the drop-in's PTX differs from the real NVRTC's";
  }
}

}  // namespace
}  // namespace kcache
