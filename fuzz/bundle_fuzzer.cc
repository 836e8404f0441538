// Fuzzes bundle::parse, which reads bundles that may come from anywhere (a
// file, a remote store, bytes embedded in a binary). Beyond "no crash, no
// sanitizer report, only kcache::Error on bad input", checks what parse
// promises: image views lie inside the input, 16-byte aligned relative to its
// start, NUL-terminated; and an accepted bundle serializes back to exactly the
// same bytes (the format has one encoding for each bundle).
//
// Random bytes almost never carry valid checksums, so each input is also tried
// with its body size and checksums recomputed: that lets mutations reach the
// image and lowered-name parsing behind the checksum gate.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "bundle/bundle.h"
#include "common/error.h"
#include "common/hash.h"

namespace {

void check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "bundle_fuzzer: broken promise: %s\n", what);
    std::abort();
  }
}

bool inside(std::string_view part, std::string_view whole) {
  return part.data() >= whole.data() && part.data() + part.size() <= whole.data() + whole.size();
}

uint64_t get_le(const std::string& b, size_t at, int n) {
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(b[at + i]);
  return v;
}

void put_le(std::string& b, size_t at, uint64_t v) {
  for (int i = 0; i < 8; ++i) b[at + i] = static_cast<char>((v >> (8 * i)) & 0xff);
}

// `b` with the body size, every image checksum it can reach and the final
// checksum made right (a lenient walk of the grammar in bundle.h).
std::string with_checksums_fixed(std::string b) {
  constexpr size_t kHeader = 20, kChecksum = 8;
  if (b.size() < kHeader + kChecksum) return b;
  put_le(b, 12, b.size() - kHeader - kChecksum);
  const size_t end = b.size() - kChecksum;
  size_t pos = kHeader;
  std::string metadata;  // what the final checksum covers: all but image data
  size_t metadata_from = 0;
  auto skip = [&](uint64_t n) {
    if (n > end - pos) return false;
    pos += static_cast<size_t>(n);
    return true;
  };
  auto skip_str = [&] { return pos + 4 <= end && skip(4 + get_le(b, pos, 4)); };
  if (skip_str() && skip_str() && pos + 4 <= end) {
    uint64_t images = get_le(b, pos, 4);
    pos += 4;
    for (uint64_t i = 0; i < images && i < 64; ++i) {
      if (!skip(1) || !skip_str() || !skip_str() || pos + 16 > end) break;
      uint64_t data_size = get_le(b, pos, 8);
      size_t checksum_at = pos + 8;
      pos += 16;
      if (!skip((16 - pos % 16) % 16)) break;
      size_t data_at = pos;
      if (!skip(data_size)) break;
      metadata.append(b, metadata_from, data_at - metadata_from);
      metadata_from = pos;
      put_le(b, checksum_at, kcache::xxh3_64(std::string_view(b).substr(data_at, data_size)));
      if (!skip(1)) break;
    }
  }
  metadata.append(b, metadata_from, end - metadata_from);
  put_le(b, end, kcache::xxh3_64(metadata));
  return b;
}

void check_parse(std::string_view bytes) {
  kcache::bundle::Bundle b;
  try {
    b = kcache::bundle::parse(bytes, "fuzz input");
  } catch (const kcache::Error&) {
    return;  // CorruptError or IncompatibleVersionError: what bad input must give
  }
  check(inside(b.source_name, bytes) && inside(b.compiler_identity, bytes), "strings inside input");
  for (const kcache::bundle::Image& image : b.images) {
    check(inside(image.arch, bytes) && inside(image.key, bytes), "image fields inside input");
    check(inside(image.data, bytes), "image data inside input");
    check((image.data.data() - bytes.data()) % kcache::bundle::kImageAlignment == 0, "aligned");
    check(image.data.data() + image.data.size() < bytes.data() + bytes.size() &&
              image.data.data()[image.data.size()] == '\0',
          "NUL-terminated");
  }
  for (const kcache::bundle::LoweredName& n : b.lowered_names) {
    check(inside(n.name_expression, bytes) && inside(n.lowered_name, bytes), "names inside input");
  }
  check(kcache::bundle::serialize(b) == bytes, "serialize(parse(x)) == x");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string bytes(reinterpret_cast<const char*>(data), size);
  check_parse(bytes);
  std::string fixed = with_checksums_fixed(bytes);
  if (fixed != bytes) check_parse(fixed);
  return 0;
}
