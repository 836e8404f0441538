// A fixture for tests that put the drop-in's path (compile_program, through
// a store of the test's own) against the real NVRTC from the same files,
// options and working folder (issue 27): every answer (result code, log, PTX,
// CUBIN) must be NVRTC's. Lookup records are on (the "too new" margin is 50 ms).
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "cache/storage.h"
#include "common/file_system.h"
#include "compiler/program.h"
#include "compiler/toolkit.h"
#include "tests/compiler/lookup_record_testing.h"
#include "tests/compiler/real_nvrtc.h"
#include "tests/compiler/test_files.h"
#include "tests/testing/temp_dir.h"

namespace kcache::compiler::testing {

// A kernel that stores VALUE, which each case defines.
constexpr char kKernel[] = "extern \"C\" __global__ void k(int* p) { p[0] = VALUE; }\n";

// Runs in `dir` as the process's working folder (NVRTC takes relative names
// from it), and back.
using InFolder = ScopedCwd;

class ProgramVsNvrtcTest : public LookupRecordFixture {
 protected:
  void SetUp() override {
    LookupRecordFixture::SetUp();
    toolkit_ = find_toolkit("");
    real_ = std::make_unique<RealNvrtc>(toolkit_.nvrtc.path);
    cache::StorageOptions so;
    so.local_dir = dir_ / "store";
    storage_ = std::make_unique<cache::Storage>(so);
  }

  void write(const std::string& relative, const std::string& text) {
    std::string path = dir_ / relative;
    FileSystem::real().create_directories(path.substr(0, path.rfind('/')), 0755);
    std::ofstream(path, std::ios::binary) << text;
  }

  ProgramResult through_kcache(const std::string& source, const std::string& name,
                               const std::vector<std::string>& options,
                               const std::vector<cache::Header>& headers = {}) {
    Compiler compiler(toolkit_, storage_.get());
    ProgramSource p;
    p.source = source;
    p.name = name;
    p.headers = headers;
    ProgramOptions mapped = program_options(p, options);
    EXPECT_EQ(mapped.unsupported, "");
    return compile_program(compiler, mapped.options);
  }

  // The PTX line that stores VALUE (where two answers differ).
  static std::string value_line(const cache::ProgramRecord& r) {
    const std::string& ptx = r.output(cache::ProgramOutput::ptx).bytes;
    size_t at = ptx.find("mov.b32");
    if (at == std::string::npos) at = ptx.find("mov.u32");
    if (at == std::string::npos) return "(no mov)";
    return ptx.substr(at, ptx.find('\n', at) - at);
  }

  // kcache's answer equals NVRTC's from the disk as it is now; returns
  // whether it was a hit. ATTACK_DEBUG=1 prints each compile's key.
  bool expect_nvrtcs_answer(const std::string& source, const std::string& name,
                            const std::vector<std::string>& options,
                            const std::vector<cache::Header>& headers = {}) {
    cache::ProgramRecord want = real_->answer(source, name, options, headers);
    ProgramResult got;
    EXPECT_NO_THROW(got = through_kcache(source, name, options, headers));
    if (std::getenv("ATTACK_DEBUG")) {
      std::fprintf(stderr, "%s hit=%d any_name=%d name_dependent=%d not_stored=%s key=%s\n",
                   name.c_str(), got.hit, got.any_name, got.name_dependent, got.not_stored.c_str(),
                   got.key.hex().c_str());
    }
    EXPECT_EQ(got.record.compile_result, want.compile_result) << got.record.log;
    EXPECT_EQ(got.record.log, want.log) << "hit=" << got.hit;
    EXPECT_EQ(got.record.output(cache::ProgramOutput::ptx), want.output(cache::ProgramOutput::ptx))
        << "hit=" << got.hit << " any_name=" << got.any_name << " not_stored=" << got.not_stored
        << " got: " << value_line(got.record) << " want: " << value_line(want);
    const cache::ProgramRecord::Output& cubin = got.record.output(cache::ProgramOutput::cubin);
    const cache::ProgramRecord::Output& want_cubin = want.output(cache::ProgramOutput::cubin);
    EXPECT_EQ(cubin.size_result, want_cubin.size_result) << "hit=" << got.hit;
    EXPECT_TRUE(cubin.bytes == want_cubin.bytes)
        << "the CUBIN differs from NVRTC's (" << cubin.bytes.size() << " against "
        << want_cubin.bytes.size() << " bytes), hit=" << got.hit;
    return got.hit;
  }

  // A miss, then a hit, both NVRTC's answer.
  void expect_cached_nvrtcs_answer(const std::string& source, const std::string& name,
                                   const std::vector<std::string>& options) {
    EXPECT_FALSE(expect_nvrtcs_answer(source, name, options)) << "the first compile is a miss";
    EXPECT_TRUE(expect_nvrtcs_answer(source, name, options)) << "the second is a hit";
  }

  Toolkit toolkit_;
  std::unique_ptr<RealNvrtc> real_;
  kcache::testing::TempDir dir_;
  std::unique_ptr<cache::Storage> storage_;
};

}  // namespace kcache::compiler::testing
