// The real NVRTC through its C API (dlopen-ed from the toolkit), for tests
// that compare kcache's answer with NVRTC's own.
#pragma once

#include <dlfcn.h>
#include <gtest/gtest.h>
#include <nvrtc.h>

#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "cache/format/key.h"
#include "cache/format/program_record.h"
#include "common/file_system.h"
#include "compiler/toolkit.h"
#include "tests/testing/temp_dir.h"

namespace kcache::compiler {

struct RealNvrtc {
  decltype(&::nvrtcCreateProgram) create;
  decltype(&::nvrtcCompileProgram) compile;
  decltype(&::nvrtcGetProgramLogSize) log_size;
  decltype(&::nvrtcGetProgramLog) log;
  decltype(&::nvrtcGetPTXSize) ptx_size;
  decltype(&::nvrtcGetPTX) ptx;
  decltype(&::nvrtcGetCUBINSize) cubin_size;
  decltype(&::nvrtcGetCUBIN) cubin;
  decltype(&::nvrtcDestroyProgram) destroy;

  explicit RealNvrtc(const std::string& path) {
    void* h = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    EXPECT_NE(h, nullptr) << path;
#define KCACHE_RESOLVE(field, name) field = reinterpret_cast<decltype(field)>(::dlsym(h, #name))
    KCACHE_RESOLVE(create, nvrtcCreateProgram);
    KCACHE_RESOLVE(compile, nvrtcCompileProgram);
    KCACHE_RESOLVE(log_size, nvrtcGetProgramLogSize);
    KCACHE_RESOLVE(log, nvrtcGetProgramLog);
    KCACHE_RESOLVE(ptx_size, nvrtcGetPTXSize);
    KCACHE_RESOLVE(ptx, nvrtcGetPTX);
    KCACHE_RESOLVE(cubin_size, nvrtcGetCUBINSize);
    KCACHE_RESOLVE(cubin, nvrtcGetCUBIN);
    KCACHE_RESOLVE(destroy, nvrtcDestroyProgram);
#undef KCACHE_RESOLVE
  }

  cache::ProgramRecord answer(const std::string& source, const std::string& name,
                              const std::vector<std::string>& options,
                              const std::vector<cache::Header>& headers = {}) const {
    nvrtcProgram p = nullptr;
    std::vector<const char*> texts, names;
    for (const cache::Header& h : headers) {
      texts.push_back(h.content.c_str());
      names.push_back(h.include_name.c_str());
    }
    EXPECT_EQ(create(&p, source.c_str(), name.empty() ? nullptr : name.c_str(),
                     static_cast<int>(headers.size()), texts.data(), names.data()),
              NVRTC_SUCCESS);
    std::vector<const char*> opts;
    for (const std::string& o : options) opts.push_back(o.c_str());
    cache::ProgramRecord r;
    r.compile_result = compile(p, static_cast<int>(opts.size()), opts.data());
    size_t n = 0;
    log_size(p, &n);
    r.log.resize(n);
    log(p, &r.log[0]);
    r.log.resize(n ? n - 1 : 0);  // without the NUL
    cache::ProgramRecord::Output& ptx_out = r.output(cache::ProgramOutput::ptx);
    ptx_out.size_result = ptx_size(p, &n);
    if (ptx_out.size_result == NVRTC_SUCCESS) {
      ptx_out.bytes.resize(n);
      ptx(p, &ptx_out.bytes[0]);
    }
    // The CUBIN where the target is a real arch (else NVRTC's error code).
    cache::ProgramRecord::Output& cubin_out = r.output(cache::ProgramOutput::cubin);
    cubin_out.size_result = cubin_size(p, &n);
    if (cubin_out.size_result == NVRTC_SUCCESS && n > 0) {
      cubin_out.bytes.resize(n);
      cubin(p, &cubin_out.bytes[0]);
    }
    destroy(&p);
    return r;
  }
};

// A test that writes files into a folder of its own and compares kcache's
// answers with the real NVRTC's from them.
class RealNvrtcTest : public ::testing::Test {
 protected:
  void SetUp() override {
    toolkit_ = find_toolkit("");
    real_ = std::make_unique<RealNvrtc>(toolkit_.nvrtc.path);
  }

  // Writes `text` to `relative` beneath dir_, making its folders.
  void write(const std::string& relative, const std::string& text) {
    std::string path = dir_ / relative;
    FileSystem::real().create_directories(path.substr(0, path.rfind('/')), 0755);
    std::ofstream(path, std::ios::binary) << text;
  }

  Toolkit toolkit_;
  std::unique_ptr<RealNvrtc> real_;
  kcache::testing::TempDir dir_;
};

}  // namespace kcache::compiler
