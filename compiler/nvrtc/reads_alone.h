// Whether the calling thread is inside NVRTC's compile (nvrtc.cc sets it
// around nvrtcCompileProgram): there NVRTC reads its header files, which no
// other thread has, one character at a time (stdio_unlocked.h says what the
// kcache binaries make of it).
#pragma once

namespace kcache::compiler {

class NvrtcReadsAlone {
 public:
  NvrtcReadsAlone();
  ~NvrtcReadsAlone();
  NvrtcReadsAlone(const NvrtcReadsAlone&) = delete;
  NvrtcReadsAlone& operator=(const NvrtcReadsAlone&) = delete;

 private:
  bool outer_;
};

bool nvrtc_reads_alone();

}  // namespace kcache::compiler
