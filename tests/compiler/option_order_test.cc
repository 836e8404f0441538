// -D and -U keep their order (issue 26 item 5), and every spelling NVRTC 13
// takes for a mapped option is one key (issue 29 item 6), against the real
// NVRTC: a kernel whose PTX says whether (and to what) X is defined is
// compiled through Compiler (kcache compile's path) and through
// compile_program (the drop-in's), and each result must equal what NVRTC
// gives for the program's own option list, the keys of different meanings
// must differ, and a second compile must hit.
#include <gtest/gtest.h>

#include <iterator>
#include <memory>
#include <set>
#include <string_view>

#include "cache/format/program_record.h"
#include "cache/storage.h"
#include "compiler/compiler.h"
#include "compiler/nvrtc/nvrtc.h"
#include "compiler/program.h"
#include "compiler/toolkit.h"
#include "tests/compiler/test_files.h"

namespace kcache::compiler {
namespace {

const std::string kSource =
    "#ifdef X\n"
    "__device__ int x_defined_as = X + 0;\n"
    "#else\n"
    "__device__ int x_not_defined = 1;\n"
    "#endif\n"
    "extern \"C\" __global__ void k(int* p) { *p = 1; }\n";

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// What the PTX says of X: "undefined" or its value.
std::string x_in(std::string_view ptx_view) {
  const std::string ptx(ptx_view);
  if (contains(ptx, "x_not_defined")) return "undefined";
  size_t at = ptx.find("x_defined_as = ");
  if (at == std::string::npos) return "?";
  at += 15;
  return ptx.substr(at, ptx.find(';', at) - at);
}

class OptionOrderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::test_dir();
    cache::StorageOptions options;
    options.local_dir = dir_ + "/store";
    storage_ = std::make_unique<cache::Storage>(options);
    toolkit_ = find_toolkit("");
    compiler_ = std::make_unique<Compiler>(toolkit_, storage_.get());
  }

  // The real NVRTC's PTX for exactly `options` (as the program passed them).
  std::string nvrtc_ptx(const std::vector<std::string>& options) {
    NvrtcInput in;
    in.source_name = "order.cu";
    in.source = kSource;
    in.options = {"-arch=compute_80"};
    in.options.insert(in.options.end(), options.begin(), options.end());
    in.program = true;
    NvrtcOutput out = Nvrtc::open(toolkit_.nvrtc.path).compile(in);
    EXPECT_EQ(out.program->compile_result, cache::kNvrtcSuccess) << out.program->log;
    return out.program->output(cache::ProgramOutput::ptx).bytes;
  }

  // The drop-in's path: the program's options mapped, compiled twice.
  ProgramResult through_program(const std::vector<std::string>& options) {
    ProgramSource p;
    p.source = kSource;
    p.name = "order.cu";
    std::vector<std::string> all = {"-arch=compute_80"};
    all.insert(all.end(), options.begin(), options.end());
    ProgramOptions mapped = program_options(p, all);
    EXPECT_EQ(mapped.unsupported, "");
    ProgramResult first = compile_program(*compiler_, mapped.options);
    ProgramResult second = compile_program(*compiler_, mapped.options);
    EXPECT_TRUE(second.hit);
    EXPECT_EQ(second.key, first.key);
    EXPECT_EQ(second.record.output(cache::ProgramOutput::ptx),
              first.record.output(cache::ProgramOutput::ptx));
    return first;
  }

  // kcache compile's path: the macros as the CLI hands them, compiled twice.
  CompileResult through_compiler(const std::vector<std::string>& macros) {
    CompileOptions o;
    o.source_text = kSource;
    o.source_name = "order.cu";
    o.ptx_arch = "compute_80";
    o.lean = false;  // NVRTC's PTX, to compare with NVRTC's
    o.macros = macros;
    CompileResult first = compiler_->compile(o);
    CompileResult second = compiler_->compile(o);
    EXPECT_EQ(second.hits(), 1);
    EXPECT_EQ(second.bundle, first.bundle);
    return first;
  }

  std::string dir_;
  Toolkit toolkit_;
  std::unique_ptr<cache::Storage> storage_;
  std::unique_ptr<Compiler> compiler_;
};

struct Case {
  std::vector<std::string> options;  // as a program passes them
  std::string x;                     // what NVRTC makes of X
};

// Each order has its own meaning: -U then -D defines X, -D then -U does not,
// the last of two -D wins. Measured with NVRTC 13 (and asserted here).
const Case kOrders[] = {
    {{"-UX", "-DX=1"}, "1"},
    {{"-DX=1", "-UX"}, "undefined"},
    {{"-DX=2", "-DX=3"}, "3"},
    {{"-DX=3", "-DX=2"}, "2"},
    {{"-DX=4", "-UX", "-DX=5"}, "5"},
    {{"-UX", "-DX=4", "-fmad=false", "-UX"}, "undefined"},
};

TEST_F(OptionOrderTest, DefinesAndUndefinesKeepTheProgramsOrderThroughTheDropIn) {
  std::set<std::string> keys;
  for (const Case& c : kOrders) {
    std::string want = nvrtc_ptx(c.options);
    ASSERT_EQ(x_in(want), c.x) << c.options.front();
    ProgramResult r = through_program(c.options);
    EXPECT_EQ(r.record.output(cache::ProgramOutput::ptx).bytes, want) << c.options.front();
    keys.insert(r.key.hex());
  }
  EXPECT_EQ(keys.size(), std::size(kOrders)) << "two orders shared a key";
}

TEST_F(OptionOrderTest, DefinesAndUndefinesKeepTheirOrderThroughCompiler) {
  std::set<std::string> keys;
  for (const Case& c : kOrders) {
    std::vector<std::string> macros;
    std::vector<std::string> others;
    for (const std::string& o : c.options) (o[1] == 'D' || o[1] == 'U' ? macros : others).push_back(o);
    if (!others.empty()) continue;  // kcache compile passes those with --nvrtc-opt
    std::string want = nvrtc_ptx(c.options);
    CompileResult r = through_compiler(macros);
    EXPECT_EQ(r.targets.at(0).entry->payload(), want.substr(0, want.find('\0')))
        << c.options.front();
    EXPECT_EQ(x_in(r.targets.at(0).entry->payload()), c.x);
    keys.insert(r.targets.at(0).key.hex());
  }
  EXPECT_EQ(keys.size(), std::size(kOrders) - 1) << "two orders shared a key";
}

// Every spelling of -D, -U and -I NVRTC 13 takes is one key through the
// drop-in, and its result is NVRTC's for that spelling.
TEST_F(OptionOrderTest, EverySpellingNvrtcTakesIsOneKeyAndNvrtcsResult) {
  const std::vector<std::vector<std::string>> spellings = {
      {"-UX", "-DX=6"},
      {"-U", "X", "-D", "X=6"},
      {"-U=X", "-D=X=6"},
      {"--undefine-macro=X", "--define-macro=X=6"},
      {"--undefine-macro", "X", "--define-macro", "X=6"},
  };
  std::set<std::string> keys;
  for (const std::vector<std::string>& s : spellings) {
    std::string want = nvrtc_ptx(s);
    ASSERT_EQ(x_in(want), "6") << s[0];
    ProgramResult r = through_program(s);
    EXPECT_EQ(r.record.output(cache::ProgramOutput::ptx).bytes, want) << s[0];
    keys.insert(r.key.hex());
  }
  EXPECT_EQ(keys.size(), 1u) << "one meaning, several keys";
}

}  // namespace
}  // namespace kcache::compiler
