// NVRTC reads every header one character at a time through getc(). glibc
// takes the FILE's lock at each call once a process has a second thread,
// and a compile process always has several (the sealed thread and its
// supervisor, seal.h), where NVRTC alone in a one-thread program has none:
// a CUB miss paid ~3 % of its time for it (build VM, perf: _IO_getc at three
// times NVRTC alone's; 1,172 against 1,140 ms with these, alternating runs).
//
// So the kcache binaries export getc, fgetc and _IO_getc
// (cli/nvrtc_stdio.lds), and NVRTC's calls bind to the definitions in
// stdio_unlocked.cc (the executable comes first in the dynamic linker's
// search). They read without the lock only on a thread inside NVRTC's
// compile (NvrtcReadsAlone) and only from a FILE other than the standard
// three: the header files NVRTC opened on that thread, which no other
// thread has. Every other call takes the lock, as glibc's does.
#pragma once

namespace kcache::compiler {

// While one lives, the calling thread is inside nvrtcCompileProgram.
class NvrtcReadsAlone {
 public:
  NvrtcReadsAlone();
  ~NvrtcReadsAlone();
  NvrtcReadsAlone(const NvrtcReadsAlone&) = delete;
  NvrtcReadsAlone& operator=(const NvrtcReadsAlone&) = delete;

 private:
  bool outer_;
};

// Whether the calling thread reads its FILEs unlocked now (for tests).
bool nvrtc_reads_alone();

}  // namespace kcache::compiler
