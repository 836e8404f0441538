// When a file's stat may stand for its bytes: the one rule every cache of
// bytes-by-stat in kcache follows (docs/KEYS.md, "When a stat stands for
// bytes"): manifests (compiler/seal/probes.h), lookup records
// (compiler/lookup_record.h), the seal's snapshot reuse (compiler/seal/seal.cc)
// and the per-process header memo (compiler/includes.cc).
//
// A write() moves mtime and ctime, but only to the file system's clock tick
// (coarse: a write in the same tick as the last leaves them as they were).
// A write through a shared mapping (MAP_SHARED) moves them only when it
// faults on a page that is not already dirty and writable: once a page is
// dirty, further writes to it change no stamp until the kernel writes the
// page back and write-protects it again, which the flusher does for pages
// dirty longer than /proc/sys/vm/dirty_expire_centisecs, looking every
// /proc/sys/vm/dirty_writeback_centisecs (measured on ext4 and tmpfs: a page
// already dirty takes writes for at least 30 s with size, mtime and ctime
// unchanged).
//
// So bytes read at time T are those of every later stat equal to the one
// taken before the read only where that stat's mtime and ctime were already
// older than T minus the writeback window: then every page dirtied by the
// last stamped write has been written back and write-protected, and any
// later write moves the stamp to T or after. Where the stamp is younger,
// the pair (stamp, bytes) is not kept: the file is read and hashed again at
// the next use (only recently written files: cheap). Where periodic
// writeback is off (dirty_writeback_centisecs 0), or on a file system whose
// stat may come from a cache or another machine's clock (NFS, FUSE), no
// stamp stands for bytes.
//
// What stays unseen, as in ccache: a page kept dirty past the window
// because the kernel could not write it back (writeback congestion or an
// I/O error), and tmpfs, whose pages are never written back (a page mapped
// writable and dirtied once takes writes with no stamp change for as long as
// the mapping lives); tmpfs is therefore not trusted at all.
#pragma once

#include <sys/stat.h>

#include <cstdint>
#include <string>

namespace kcache {

struct FileStamp {
  uint64_t dev = 0, ino = 0, size = 0, mtime_ns = 0, ctime_ns = 0;
  static FileStamp of(const struct stat& st);
  bool operator==(const FileStamp& o) const {
    return dev == o.dev && ino == o.ino && size == o.size && mtime_ns == o.mtime_ns &&
           ctime_ns == o.ctime_ns;
  }
  bool operator!=(const FileStamp& o) const { return !(*this == o); }
};

// The writeback window in ns: dirty_expire plus dirty_writeback plus two
// seconds for timestamp granularity, read from /proc once per process (30 s
// and 5 s where /proc cannot be read); INT64_MAX where periodic writeback is
// off. Thread-safe; allocates nothing after the first call.
int64_t writeback_window_ns();

// Whether a stamp with these times, seen before bytes read at `read_ns`
// (CLOCK_REALTIME), stands for those bytes: both older than the window.
// Allocates nothing (the seal's supervisor calls it) once
// writeback_window_ns() has been called.
bool stamp_settled(uint64_t mtime_ns, uint64_t ctime_ns, int64_t read_ns);

// Whether the file system with statfs f_type `type` answers stat from the
// inode itself, with ctime from this machine's clock, and writes mapped
// pages back (ext4, xfs, btrfs, overlayfs, f2fs, zfs, squashfs). Not tmpfs,
// NFS or FUSE.
bool stamps_trusted_on_type(uint64_t type);

// The same for the file system holding `path` (a statfs, remembered per
// device `dev` and thread; takes no lock).
bool stamps_trusted_on(uint64_t dev, const std::string& path);

// Both rules: `stamp` (of `path`), seen before bytes read at `read_ns`,
// stands for them.
bool stamp_stands_for_bytes(const FileStamp& stamp, const std::string& path, int64_t read_ns);

// CLOCK_REALTIME in ns.
int64_t realtime_now_ns();

// Tests: a window of `ns` (negative: the measured one again; never less than
// 10 ms, the coarsest clock tick, in stamp_settled), and whether
// tmpfs counts as trusted (tests that age files in seconds need a short
// window; those on tmpfs need it trusted).
void set_writeback_window_for_testing(int64_t ns);
void set_trust_tmpfs_for_testing(bool trust);

}  // namespace kcache
