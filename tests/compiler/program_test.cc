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
  EXPECT_EQ(o.options.macros, (std::vector<std::string>{"-DA=1", "-DB"}));
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
      {{"-arch=sm_90", "--pch-dir=/tmp/p"}, "option --pch-dir=/tmp/p: precompiled headers"},
      {{"-arch=sm_90", "-include", "x.h"}, "option -include: it includes a file"},
      {{"-arch=sm_90", "-I"}, "option -I: no value follows it"},
      {{"-arch=sm_90", "-std", "c++17"}, "option -std: NVRTC 13 takes no separate value"},
      {{"-arch=sm_90", "-std=c++17", "--std=c++20"}, "a second -std"},
      {{"-arch=sm_90", "-D==X"}, "a value kcache does not map exactly"},
      {{"-arch=sm_90", "-D X"}, "a value kcache does not map exactly"},
      {{"-arch=sm_90", "-I="}, "a value kcache does not map exactly"},
      {{"-arch=sm_90", "-UX=1"}, "an undefine with a value"},
      {{"-arch", "sm_90", "--gpu-architecture", "sm_80"}, "a second target"},
      {{"-arch=sm_90", "-arch=sm_80"}, "a second target"},
      {{"-std=c++17"}, "(no -arch): NVRTC's default target"},
      {{"-arch=gfx90a"}, "not an architecture kcache knows"},
      {{"-arch=sm_90", "-D=", "X"}, "a value kcache does not map exactly"},
  };
  for (const Case& c : cases) {
    ProgramOptions o = program_options(source(), c.options);
    EXPECT_NE(o.unsupported.find(c.says), std::string::npos)
        << c.options.back() << ": " << o.unsupported;
  }
}

// NVRTC 13 takes each of these spellings (measured with a program against
// libnvrtc.so.13: docs/NVRTC_SHIM.md): the value glued, after '=', or as the
// next argument whatever it holds. Each maps onto the one option kcache
// keys, so every spelling of a program shares its entries.
TEST(ProgramOptionsTest, EverySpellingNvrtcTakesMapsOntoOneOption) {
  const std::vector<std::vector<std::string>> spellings = {
      {"-arch=sm_90", "-Iinc", "-DX=1", "-UY", "-std=c++17"},
      {"-arch", "sm_90", "-I", "inc", "-D", "X=1", "-U", "Y", "--std=c++17"},
      {"--gpu-architecture=sm_90", "--include-path=inc", "--define-macro=X=1",
       "--undefine-macro=Y", "-std=c++17"},
      {"--gpu-architecture", "sm_90", "--include-path", "inc", "--define-macro", "X=1",
       "--undefine-macro", "Y", "-std=c++17"},
      {"-arch=sm_90", "-I=inc", "-D=X=1", "-U=Y", "-std=c++17"},
  };
  for (const std::vector<std::string>& options : spellings) {
    ProgramOptions o = program_options(source(), options);
    ASSERT_EQ(o.unsupported, "") << options[1];
    EXPECT_EQ(o.options.archs, std::vector<std::string>{"sm_90"}) << options[1];
    EXPECT_EQ(o.options.include_dirs, std::vector<std::string>{"inc"}) << options[1];
    EXPECT_EQ(o.options.macros, (std::vector<std::string>{"-DX=1", "-UY"})) << options[1];
    EXPECT_EQ(o.options.std, "c++17");
    EXPECT_TRUE(o.options.nvrtc_options.empty()) << options[1];
    EXPECT_EQ(canonical_options(o.options),
              (std::vector<std::string>{"-std=c++17", "-DX=1", "-UY"}));
  }
  // Alone, the next argument is the value whatever it holds (NVRTC: `-D -UX`
  // defines a macro "-UX" and fails; `-I -DX` searches a folder "-DX").
  ProgramOptions o = program_options(source(), {"-arch=sm_90", "-I", "-DX"});
  ASSERT_EQ(o.unsupported, "");
  EXPECT_EQ(o.options.include_dirs, std::vector<std::string>{"-DX"});
  EXPECT_TRUE(o.options.macros.empty());
}

// -D and -U keep the program's order (issue 26): NVRTC applies them in
// order, so `-UX -DX=1` defines X and `-DX=1 -UX` does not.
TEST(ProgramOptionsTest, DefinesAndUndefinesKeepTheirOrder) {
  ProgramOptions a = program_options(source(), {"-arch=sm_90", "-UX", "-DX=1", "-fmad=false"});
  ProgramOptions b = program_options(source(), {"-arch=sm_90", "-DX=1", "-fmad=false", "-UX"});
  ASSERT_EQ(a.unsupported, "");
  ASSERT_EQ(b.unsupported, "");
  EXPECT_EQ(canonical_options(a.options),
            (std::vector<std::string>{"-UX", "-DX=1", "-fmad=false"}));
  EXPECT_EQ(canonical_options(b.options),
            (std::vector<std::string>{"-DX=1", "-UX", "-fmad=false"}));
}

}  // namespace
}  // namespace kcache::compiler
