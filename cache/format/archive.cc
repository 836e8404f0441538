#include "cache/format/archive.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <memory>

#include "common/bytes.h"
#include "common/error.h"
#include "common/file_system.h"
#include "common/hash.h"

namespace kcache::cache {
namespace {

constexpr std::string_view kArchiveMagic{"KCARCHV\0", 8};
constexpr uint8_t kRecordTag = 1;
constexpr uint8_t kEndTag = 0;
// No single entry is this large; a bigger size field is damage, not data.
constexpr uint64_t kMaxEntrySize = 1ull << 32;

struct FileCloser {
  void operator()(FILE* f) const { std::fclose(f); }
};
using File = std::unique_ptr<FILE, FileCloser>;

// Writes through a checksum, so the trailer covers every byte written.
class ArchiveWriter {
 public:
  ArchiveWriter(FILE* file, std::string path) : file_(file), path_(std::move(path)) {}
  void write(std::string_view bytes) {
    hasher_.update(bytes);
    raw(bytes);
  }
  void raw(std::string_view bytes) {
    if (std::fwrite(bytes.data(), 1, bytes.size(), file_) != bytes.size()) {
      throw IoError(errno_message("cannot write", path_, errno));
    }
  }
  Hash128 digest() const { return hasher_.digest(); }

 private:
  FILE* file_;
  std::string path_;
  Hasher128 hasher_;
};

class ArchiveReader {
 public:
  ArchiveReader(FILE* file, std::string path) : file_(file), path_(std::move(path)) {}
  // False at end of file before `n` bytes (the archive is truncated).
  bool read(size_t n, std::string& out) {
    out.resize(n);
    size_t got = std::fread(out.data(), 1, n, file_);
    if (got != n && std::ferror(file_)) throw IoError(errno_message("cannot read", path_, errno));
    out.resize(got);
    hasher_.update(out);
    return got == n;
  }
  Hash128 digest() const { return hasher_.digest(); }

 private:
  FILE* file_;
  std::string path_;
  Hasher128 hasher_;
};

uint64_t le64(std::string_view b) {
  ByteReader r(b, "archive");
  return r.u64("size");
}

}  // namespace

ExportResult export_archive(Store& store, const std::string& path) {
  const std::string temp = path + ".tmp." + std::to_string(getpid());
  File file(std::fopen(temp.c_str(), "wb"));
  if (!file) throw IoError(errno_message("cannot create", temp, errno));
  ExportResult result;
  try {
    ArchiveWriter out(file.get(), path);
    ByteWriter header;
    header.bytes(kArchiveMagic);
    header.u16(kArchiveFormatVersion);
    out.write(header.data());
    for (const EntryInfo& info : store.list()) {
      // Entries may be evicted by another process while we export.
      std::optional<Entry> entry = store.get(info.key, Store::Access::maintenance);
      if (!entry) continue;
      ByteWriter record;
      record.u8(kRecordTag);
      record.u64(entry->encoded().size());
      out.write(record.data());
      out.write(entry->encoded());
      result.entries += 1;
    }
    ByteWriter end;
    end.u8(kEndTag);
    end.u64(result.entries);
    out.write(end.data());
    Hash128 digest = out.digest();
    ByteWriter checksum;
    checksum.u64(digest.high);
    checksum.u64(digest.low);
    out.raw(checksum.data());
    if (std::fflush(file.get()) != 0) throw IoError(errno_message("cannot write", path, errno));
    result.bytes = static_cast<uint64_t>(std::ftell(file.get()));
    if (std::fclose(file.release()) != 0) throw IoError(errno_message("cannot write", path, errno));
    if (std::rename(temp.c_str(), path.c_str()) != 0) {
      throw IoError(errno_message("cannot rename into", path, errno));
    }
  } catch (...) {
    std::remove(temp.c_str());
    throw;
  }
  return result;
}

ImportResult import_archive(Store& store, const std::string& path) {
  File file(std::fopen(path.c_str(), "rb"));
  if (!file) throw IoError(errno_message("cannot open", path, errno));
  ArchiveReader in(file.get(), path);
  std::string buf;
  if (!in.read(kArchiveMagic.size() + 2, buf) || buf.substr(0, 8) != kArchiveMagic) {
    throw CorruptError(path +
                       " is not a kcache archive (bad magic); was it written by "
                       "`kcache export`?");
  }
  ByteReader header(buf, path);
  header.bytes(8, "magic");
  uint16_t version = header.u16("version");
  if (version == 0 || version > kArchiveFormatVersion) {
    throw IncompatibleVersionError(path + " has archive format version " + std::to_string(version) +
                                   ", newer than this kcache reads (" +
                                   std::to_string(kArchiveFormatVersion) + "); upgrade kcache");
  }

  ImportResult result;
  uint64_t records = 0;
  auto stop = [&](const std::string& problem) {
    result.complete = false;
    result.problems.push_back(path + ": " + problem + " after " + std::to_string(records) +
                              " entries; the entries before it were imported");
  };
  for (;;) {
    std::string tag;
    if (!in.read(1, tag)) {
      stop("truncated (no end marker)");
      break;
    }
    if (static_cast<uint8_t>(tag[0]) == kEndTag) {
      std::string count;
      if (!in.read(8, count)) {
        stop("truncated end marker");
        break;
      }
      Hash128 expected = in.digest();
      // The checksum itself is not part of what it covers: read it raw.
      std::string checksum(16, '\0');
      if (std::fread(checksum.data(), 1, 16, file.get()) != 16) {
        stop("truncated checksum");
        break;
      }
      ByteReader c(checksum, path);
      Hash128 actual{c.u64("checksum"), c.u64("checksum")};
      if (actual != expected) stop("checksum mismatch");
      if (le64(count) != records) stop("record count mismatch");
      break;
    }
    if (static_cast<uint8_t>(tag[0]) != kRecordTag) {
      stop("unknown record tag " + std::to_string(static_cast<uint8_t>(tag[0])));
      break;
    }
    std::string size_bytes;
    if (!in.read(8, size_bytes)) {
      stop("truncated record");
      break;
    }
    uint64_t size = le64(size_bytes);
    if (size > kMaxEntrySize) {
      stop("implausible entry size " + std::to_string(size));
      break;
    }
    std::string encoded;
    if (!in.read(static_cast<size_t>(size), encoded)) {
      stop("truncated entry");
      break;
    }
    records += 1;
    try {
      Entry entry =
          Entry::decode(std::move(encoded), "entry " + std::to_string(records) + " of " + path);
      if (store.info(entry.key())) {
        result.already_present += 1;
      } else {
        store.put(entry);
        result.imported += 1;
      }
    } catch (const CorruptError& e) {
      result.rejected += 1;
      result.problems.push_back(e.what());
    } catch (const IncompatibleVersionError& e) {
      result.rejected += 1;
      result.problems.push_back(e.what());
    }
  }
  return result;
}

}  // namespace kcache::cache
