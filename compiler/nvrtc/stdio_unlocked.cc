#include "compiler/nvrtc/stdio_unlocked.h"

#include <stdio.h>
#include <stdio_ext.h>
#if __has_include(<sys/single_threaded.h>)  // glibc 2.32+
#include <sys/single_threaded.h>
#define KCACHE_ONE_THREAD() (__libc_single_threaded != 0)
#else
#define KCACHE_ONE_THREAD() false  // older glibc: the lock, as before 2.32's fast path
#endif

#include "compiler/nvrtc/reads_alone.h"

namespace {

// Unlocked again however the read ends (a thread cancelled inside getc, as
// glibc's own getc does).
struct FileLock {
  explicit FileLock(FILE* f) : file(f) { flockfile(file); }
  ~FileLock() { funlockfile(file); }
  FILE* file;
};

int read_char(FILE* f) {
  if ((kcache::compiler::nvrtc_reads_alone() && f != stdin && f != stdout && f != stderr) ||
      KCACHE_ONE_THREAD() || __fsetlocking(f, FSETLOCKING_QUERY) == FSETLOCKING_BYCALLER) {
    return getc_unlocked(f);
  }
  FileLock lock(f);
  return getc_unlocked(f);
}

}  // namespace

// What NVRTC imports (nm -D libnvrtc.so.13: getc, fgetc, _IO_getc).
extern "C" {
int _IO_getc(FILE* f);
int getc(FILE* f) { return read_char(f); }
int fgetc(FILE* f) { return read_char(f); }
int _IO_getc(FILE* f) { return read_char(f); }
}
