// What find_toolkit() reads of the toolkit's files (the libraries' head and
// tail, cuda.h's CUDA_VERSION, CCCL's version), remembered between processes
// by the files' stats, so a hit does not read and hash 6 x 64 KiB again.
//
// The stamp rule (common/stamp_trust.h, docs/KEYS.md "When a stat stands for
// bytes"): a value is remembered only where the file's stamp, taken by fstat
// on the descriptor it was then read from, stood for its bytes (older than the
// writeback window when the read began, on a file system whose stamps hold).
// A later process takes the value where stat(path) is that stamp again
// (device, inode, size, mtime, ctime); any other stat, or a file that cannot
// be stat-ed, reads the file as before. A value whose stamp did not stand is
// used by this process and not remembered.
//
// The file: <store folder>/toolkit-stamps, read with one open, written whole
// (a temporary name, then a rename) when this process computed a value that
// it may remember. A damaged, foreign or oversized file is ignored (a
// checksum covers it) and replaced; a file written by a newer kcache too.
//
//   memo  ::= magic:"KCTKMEMO"(8) version:u16(=1) count:u32 item{count}
//             checksum:u64 (XXH3-64 of every byte before it)
//   item  ::= what:str path:str dev:u64 ino:u64 size:u64 mtime_ns:u64
//             ctime_ns:u64 value:str
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "common/stamp_trust.h"

namespace kcache::compiler {

class ToolkitMemo {
 public:
  // `file` empty: nothing is remembered (every value is computed).
  explicit ToolkitMemo(std::string file);

  // The value `what` of the file at `path`: remembered, where stat(path) is
  // the remembered stamp; else `compute` on the file opened now (read-only).
  // nullopt where the file cannot be opened (the caller says why).
  std::optional<std::string> value(const std::string& what, const std::string& path,
                                   const std::function<std::string(int fd)>& compute);

  // Writes the file where this process computed a value it may remember.
  // Best effort: a store that cannot be written stays as it was.
  void save() const;

 private:
  struct Item {
    std::string what, path;
    FileStamp stamp;
    std::string value;
  };
  void load();
  std::string encode() const;

  std::string file_;
  std::vector<Item> items_;
  bool changed_ = false;
};

// The memo of the store folder `store_dir` ("": none).
std::string toolkit_memo_path(const std::string& store_dir);

}  // namespace kcache::compiler
