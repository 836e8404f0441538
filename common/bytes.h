// Little-endian binary encoding shared by kcache's on-disk formats (cache
// entries, bundles). The reader checks every bound and throws CorruptError
// naming what it was reading, so a truncated or tampered file can never read
// past its end.
#pragma once

#include "common/cxx17.h"  // first: says so in one line below C++17

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kcache {

class ByteWriter {
 public:
  void u8(uint8_t v) { out_.push_back(static_cast<char>(v)); }
  void u16(uint16_t v) { put_le(v, 2); }
  void u32(uint32_t v) { put_le(v, 4); }
  void u64(uint64_t v) { put_le(v, 8); }
  void bytes(std::string_view b) { out_.append(b.data(), b.size()); }
  // u32 length, then the bytes.
  void str(std::string_view s) {
    u32(static_cast<uint32_t>(s.size()));
    bytes(s);
  }
  // u32 count, then each as str().
  void strs(const std::vector<std::string>& items) {
    u32(static_cast<uint32_t>(items.size()));
    for (const std::string& s : items) str(s);
  }
  size_t size() const { return out_.size(); }
  const std::string& data() const { return out_; }
  std::string take() { return std::move(out_); }

 private:
  void put_le(uint64_t v, int n) {
    for (int i = 0; i < n; ++i) out_.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  }
  std::string out_;
};

class ByteReader {
 public:
  // `what` names the thing being parsed in error messages ("cache entry", "bundle").
  ByteReader(std::string_view data, std::string what) : data_(data), what_(std::move(what)) {}

  uint8_t u8(const char* field) { return static_cast<uint8_t>(get_le(1, field)); }
  uint16_t u16(const char* field) { return static_cast<uint16_t>(get_le(2, field)); }
  uint32_t u32(const char* field) { return static_cast<uint32_t>(get_le(4, field)); }
  uint64_t u64(const char* field) { return get_le(8, field); }
  std::string_view bytes(size_t n, const char* field);
  // u32 length, then the bytes; the length must fit in what is left.
  std::string_view str(const char* field) { return bytes(u32(field), field); }
  // u32 count, then each as str(); a count the bytes left cannot hold fails
  // before anything is allocated for it.
  std::vector<std::string> strs(const char* field) {
    const uint32_t n = u32(field);
    if (n > remaining() / 4) fail(std::string(field) + " count past the end");
    std::vector<std::string> out;
    out.reserve(n);
    for (uint32_t i = 0; i < n; ++i) out.emplace_back(str(field));
    return out;
  }

  size_t offset() const { return pos_; }
  size_t remaining() const { return data_.size() - pos_; }
  // Throws unless every byte was consumed (trailing garbage is corruption too).
  void expect_end() const;
  [[noreturn]] void fail(const std::string& problem) const;

 private:
  uint64_t get_le(int n, const char* field);
  std::string_view data_;
  std::string what_;
  size_t pos_ = 0;
};

}  // namespace kcache
