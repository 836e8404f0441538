#include "compiler/nvrtc/stdio_unlocked.h"

#include <stdio.h>

namespace kcache::compiler {
namespace {

thread_local bool reads_alone = false;

int read_char(FILE* f) {
  if (reads_alone && f != stdin && f != stdout && f != stderr) return getc_unlocked(f);
  flockfile(f);
  int c = getc_unlocked(f);
  funlockfile(f);
  return c;
}

}  // namespace

NvrtcReadsAlone::NvrtcReadsAlone() : outer_(reads_alone) { reads_alone = true; }
NvrtcReadsAlone::~NvrtcReadsAlone() { reads_alone = outer_; }

bool nvrtc_reads_alone() { return reads_alone; }

}  // namespace kcache::compiler

// What NVRTC imports (nm -D libnvrtc.so.13: getc, fgetc, _IO_getc).
extern "C" {
int _IO_getc(FILE* f);
int getc(FILE* f) { return kcache::compiler::read_char(f); }
int fgetc(FILE* f) { return kcache::compiler::read_char(f); }
int _IO_getc(FILE* f) { return kcache::compiler::read_char(f); }
}
