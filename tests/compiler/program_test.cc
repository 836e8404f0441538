// How an NVRTC program's options become kcache's (compiler/program.h): what
// is keyed, what goes to the real NVRTC, and why.
#include "compiler/program.h"

#include <gtest/gtest.h>

namespace kcache::compiler {
namespace {

ProgramSource source() {
  ProgramSource p;
  p.source = "__global__ void k() {}\n";
  p.headers = {{"params.h", "constexpr int n = 1;\n"}};
  p.name_expressions = {"k"};
  return p;
}

TEST(ProgramOptionsTest, MapsNvrtcsSpellingsOntoKcachesOptions) {
  ProgramOptions o =
      program_options(source(), {"-arch=sm_90", "-Iinc", "--include-path=more", "-DA=1",
                                 "--define-macro=B", "-std=c++17", "--fmad=false", "-ftz=true"});
  ASSERT_EQ(o.unsupported, "");
  EXPECT_TRUE(o.options.program);
  EXPECT_FALSE(o.options.lean);
  EXPECT_EQ(o.options.archs, std::vector<std::string>{"sm_90"});
  EXPECT_EQ(o.options.ptx_arch, "");
  EXPECT_EQ(o.options.include_dirs, (std::vector<std::string>{"inc", "more"}));
  EXPECT_EQ(o.options.defines, (std::vector<std::string>{"A=1", "B"}));
  EXPECT_EQ(o.options.std, "c++17");
  EXPECT_EQ(o.options.nvrtc_options, (std::vector<std::string>{"--fmad=false", "-ftz=true"}));
  EXPECT_EQ(o.options.memory_headers.size(), 1u);
  EXPECT_EQ(o.options.name_expressions, std::vector<std::string>{"k"});
  EXPECT_EQ(o.options.source_name, "default_program");  // NVRTC's name for none
}

TEST(ProgramOptionsTest, AVirtualArchIsPtxAndTheNameIsKept) {
  ProgramSource p = source();
  p.name = "dir/kernel.cu";
  ProgramOptions o = program_options(p, {"--gpu-architecture=compute_80"});
  ASSERT_EQ(o.unsupported, "");
  EXPECT_EQ(o.options.ptx_arch, "compute_80");
  EXPECT_TRUE(o.options.archs.empty());
  EXPECT_EQ(o.options.source_name, "dir/kernel.cu");
  EXPECT_EQ(o.options.source_path, "dir/kernel.cu");  // quoted includes are searched in dir/
}

TEST(ProgramOptionsTest, WhatKcacheCannotKeyIsRefusedSayingWhy) {
  struct Case {
    std::vector<std::string> options;
    std::string says;
  };
  const Case cases[] = {
      {{"-arch=sm_90", "-dlto"}, "option -dlto: its LTO-IR embeds the working directory"},
      {{"-arch=sm_90", "-lineinfo"}, "option -lineinfo: its line table names the working"},
      {{"-arch=sm_90", "-G"}, "option -G: its debug information"},
      {{"-arch=sm_90", "--pch-dir=/tmp/p"}, "option --pch-dir=/tmp/p: precompiled headers"},
      {{"-arch=sm_90", "-include", "x.h"}, "option -include: it includes a file"},
      {{"-arch=sm_90", "-I", "inc"}, "option -I: its value as a separate option"},
      {{"-arch=sm_90", "-arch=sm_80"}, "a second target"},
      {{"-std=c++17"}, "(no -arch): NVRTC's default target"},
      {{"-arch=gfx90a"}, "not an architecture kcache knows"},
      {{"-arch=sm_90", "-D=1"}, "no macro name"},
  };
  for (const Case& c : cases) {
    ProgramOptions o = program_options(source(), c.options);
    EXPECT_NE(o.unsupported.find(c.says), std::string::npos)
        << c.options.back() << ": " << o.unsupported;
  }
}

}  // namespace
}  // namespace kcache::compiler
