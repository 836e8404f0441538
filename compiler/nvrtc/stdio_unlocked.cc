#include "compiler/nvrtc/stdio_unlocked.h"

#include <stdio.h>
#include <stdio_ext.h>
#include <sys/single_threaded.h>

#include "compiler/nvrtc/reads_alone.h"

namespace {

int read_char(FILE* f) {
  if ((kcache::compiler::nvrtc_reads_alone() && f != stdin && f != stdout && f != stderr) ||
      __libc_single_threaded || __fsetlocking(f, FSETLOCKING_QUERY) == FSETLOCKING_BYCALLER) {
    return getc_unlocked(f);
  }
  flockfile(f);
  int c = getc_unlocked(f);
  funlockfile(f);
  return c;
}

}  // namespace

// What NVRTC imports (nm -D libnvrtc.so.13: getc, fgetc, _IO_getc).
extern "C" {
int _IO_getc(FILE* f);
int getc(FILE* f) { return read_char(f); }
int fgetc(FILE* f) { return read_char(f); }
int _IO_getc(FILE* f) { return read_char(f); }
}
