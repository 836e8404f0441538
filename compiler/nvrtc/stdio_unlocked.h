// NVRTC reads every header one character at a time through getc(). glibc
// takes the FILE's lock at each call once a process has a second thread,
// and a compile process always has several (the sealed thread and its
// supervisor, seal.h), where NVRTC alone in a one-thread program has none:
// a CUB miss paid ~3 % of its time for it (build VM, perf: _IO_getc at three
// times NVRTC alone's; 1,172 against 1,140 ms without it, alternating runs).
//
// So the kcache binaries, and only they (//compiler/nvrtc:stdio_unlocked is
// linked into //cli:kcache and //cli:kcache_tool), define getc, fgetc and
// _IO_getc; an executable's definition takes the place of libc's for the
// whole process (cli/nvrtc_stdio.lds exports them; the linker would anyway),
// so NVRTC's calls bind here. On a thread inside NVRTC's compile
// (reads_alone.h) a FILE other than the standard three is read without the
// lock: a header NVRTC opened on that thread, which no other thread has.
// Every other call does what glibc's getc does: no lock while the process
// has one thread or for a FILE its caller locks (FSETLOCKING_BYCALLER),
// else the FILE's lock.
#pragma once
