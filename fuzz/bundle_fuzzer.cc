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
//
// A checksum is no signature: a hostile bundle has valid ones. So a
// structure-aware mutator (LLVMFuzzerCustomMutator) decodes the input
// leniently, changes one field (an arch, a key, a name, an image's kind, an
// image's lean record, the image list) to a hostile or mutated value and
// re-serializes it with every checksum right; and every accepted bundle must be
// safe to extract: each image's file name is a plain name (common/safe_path.h,
// what `kcache bundle --extract DIR` uses), so extraction cannot leave DIR;
// archs follow the arch grammar and match the image kind; no text field holds a
// control character; each lean record is one of its forms (a format 1 bundle's
// read as unknown).
#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "bundle/bundle.h"
#include "common/arch.h"
#include "common/bytes.h"
#include "common/error.h"
#include "common/hash.h"
#include "common/lean_record.h"
#include "common/safe_path.h"
#include "fuzz/lean_record_mutation.h"

// libFuzzer's own mutation, for the custom mutator; absent (weak) when the
// target is linked with the replay main instead.
extern "C" size_t LLVMFuzzerMutate(uint8_t* data, size_t size, size_t max_size)
    __attribute__((weak));

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
  const bool lean_records = get_le(b, 8, 2) >= 2;  // format 2 on
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
      if (!skip(1) || !skip_str() || !skip_str()) break;
      if (lean_records && !skip(kcache::LeanRecord::kSize)) break;
      if (pos + 16 > end) break;
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
  for (const kcache::bundle::Image& image : b.images) {
    check(image.lean.problem().empty(), "each lean record is one of its forms");
    check(b.format_version != 1 || image.lean.unknown(), "format 1: lean records unknown");
  }
  if (b.format_version == kcache::bundle::kFormatVersion) {
    check(kcache::bundle::serialize(b) == bytes, "serialize(parse(x)) == x");
  } else {
    // A format 1 bundle writes as the current format, losing nothing.
    std::string again = kcache::bundle::serialize(b);
    kcache::bundle::Bundle c = kcache::bundle::parse(again, "re-serialized fuzz input");
    check(c.images.size() == b.images.size() && c.lowered_names.size() == b.lowered_names.size(),
          "a format 1 bundle re-serializes whole");
    for (size_t i = 0; i < c.images.size(); ++i) {
      check(c.images[i].data == b.images[i].data && c.images[i].lean == b.images[i].lean,
            "a format 1 image re-serializes whole");
    }
  }
  // Safe to extract, print and log.
  auto text_ok = [](std::string_view t) {
    return kcache::find_control_character(t) == std::string_view::npos;
  };
  check(text_ok(b.source_name) && text_ok(b.compiler_identity), "no control characters");
  for (const kcache::bundle::Image& image : b.images) {
    std::string name = std::string(image.arch) +
                       (image.kind == kcache::bundle::ImageKind::ptx ? ".ptx" : ".cubin");
    check(kcache::is_plain_name(name), "extraction stays inside DIR");
    std::optional<kcache::Arch> arch = kcache::parse_arch(image.arch);
    check(arch.has_value(), "arch follows the grammar");
    check(arch->is_virtual == (image.kind == kcache::bundle::ImageKind::ptx), "kind matches arch");
  }
  for (const kcache::bundle::LoweredName& n : b.lowered_names) {
    check(text_ok(n.name_expression) && text_ok(n.lowered_name), "no control characters");
  }
}

// The fields of a bundle, read without any check (the grammar in bundle.h),
// as owned strings the mutator can change.
struct LooseImage {
  uint8_t kind = 2;
  std::string arch, key, data;
  // Raw (unchecked) lean record; a format 1 image has none.
  uint8_t lean_flags = 0;
  uint64_t lean_bytes = 0;
  uint32_t lean_variables = 0;
};
struct LooseBundle {
  std::string source_name, compiler_identity;
  std::vector<LooseImage> images;
  std::vector<std::pair<std::string, std::string>> names;
};

bool decode_loose(std::string_view b, LooseBundle& out) {
  constexpr size_t kHeader = 20, kChecksum = 8;
  if (b.size() < kHeader + kChecksum) return false;
  size_t pos = kHeader;
  const bool lean_records =
      (static_cast<unsigned char>(b[8]) | static_cast<unsigned char>(b[9]) << 8) >= 2;
  const size_t end = b.size() - kChecksum;
  auto u = [&](int n, uint64_t& v) {
    if (end - pos < static_cast<size_t>(n)) return false;
    v = 0;
    for (int i = n - 1; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(b[pos + i]);
    pos += n;
    return true;
  };
  auto str = [&](std::string& s) {
    uint64_t n;
    if (!u(4, n) || n > end - pos) return false;
    s.assign(b.substr(pos, n));
    pos += n;
    return true;
  };
  uint64_t count;
  if (!str(out.source_name) || !str(out.compiler_identity) || !u(4, count)) return false;
  for (uint64_t i = 0; i < count && i < 64; ++i) {
    LooseImage image;
    uint64_t kind, size, sum;
    if (!u(1, kind) || !str(image.arch) || !str(image.key)) return false;
    if (lean_records) {
      uint64_t flags, bytes, variables;
      if (!u(1, flags) || !u(8, bytes) || !u(4, variables)) return false;
      image.lean_flags = static_cast<uint8_t>(flags);
      image.lean_bytes = bytes;
      image.lean_variables = static_cast<uint32_t>(variables);
    }
    if (!u(8, size) || !u(8, sum)) return false;
    pos += std::min((16 - pos % 16) % 16, end - pos);
    if (size > end - pos) return false;
    image.kind = static_cast<uint8_t>(kind);
    image.data.assign(b.substr(pos, size));
    pos += size + (pos + size < end ? 1 : 0);
    out.images.push_back(std::move(image));
  }
  if (!u(4, count)) return true;  // names are optional for mutation purposes
  for (uint64_t i = 0; i < count && i < 64; ++i) {
    std::pair<std::string, std::string> n;
    if (!str(n.first) || !str(n.second)) break;
    out.names.push_back(std::move(n));
  }
  return true;
}

// The current format written field by field, as a hostile writer would (serialize()
// refuses lean records outside their forms), sizes and checksums then made right.
std::string serialize_loose(const LooseBundle& l) {
  kcache::ByteWriter w;
  w.bytes(kcache::bundle::kMagic);
  w.u16(kcache::bundle::kFormatVersion);
  w.u16(0);  // flags
  w.u64(0);  // body size
  w.str(l.source_name);
  w.str(l.compiler_identity);
  w.u32(static_cast<uint32_t>(l.images.size()));
  for (const LooseImage& i : l.images) {
    w.u8(i.kind);
    w.str(i.arch);
    w.str(i.key);
    w.u8(i.lean_flags);
    w.u64(i.lean_bytes);
    w.u32(i.lean_variables);
    w.u64(i.data.size());
    w.u64(0);  // data checksum
    while (w.size() % kcache::bundle::kImageAlignment) w.u8(0);
    w.bytes(i.data);
    w.u8(0);
  }
  w.u32(static_cast<uint32_t>(l.names.size()));
  for (const auto& n : l.names) {
    w.str(n.first);
    w.str(n.second);
  }
  w.u64(0);  // checksum
  return with_checksums_fixed(w.take());
}

// What a hostile bundle puts in a string field, and what a valid one does.
const std::string kValues[] = {"../../pwned",
                               "/etc/passwd",
                               "sm_90/../../x",
                               ".",
                               "..",
                               "",
                               "sm_90\n",
                               std::string("sm_90\0x", 7),
                               "\x1b]0;title\x07",
                               "compute_90",
                               "compute_100f",
                               "compute_90a",
                               "sm_80",
                               "sm_90a",
                               "sm_100f",
                               "sm_121",
                               "sm_9000",
                               "SM_90",
                               "0123456789abcdef0123456789abcdef",
                               "0123456789ABCDEF0123456789ABCDEF",
                               "scale<float>",
                               "_Z5scaleIfEvPT_S0_i",
                               "a\nb",
                               "\x7f"};

// One structural change to `l`.
void mutate_fields(LooseBundle& l, std::minstd_rand& rng) {
  auto pick = [&]() -> const std::string& { return kValues[rng() % std::size(kValues)]; };
  auto bytes_mutate = [&](std::string& s) {
    if (!LLVMFuzzerMutate) return void(s = pick());
    const size_t size = s.size(), max = size * 2 + 16;
    s.resize(max);
    s.resize(LLVMFuzzerMutate(reinterpret_cast<uint8_t*>(s.data()), size, max));
  };
  auto change = [&](std::string& s) { rng() % 2 ? void(s = pick()) : bytes_mutate(s); };
  switch (rng() % 8) {
    case 0:
      change(rng() % 2 ? l.source_name : l.compiler_identity);
      return;
    case 1:
    case 2:
      if (!l.images.empty()) change(l.images[rng() % l.images.size()].arch);
      return;
    case 3:
      if (!l.images.empty()) change(l.images[rng() % l.images.size()].key);
      return;
    case 4:
      if (!l.images.empty()) l.images[rng() % l.images.size()].kind = 1 + rng() % 2;
      return;
    case 6:
      if (!l.images.empty()) {
        LooseImage& image = l.images[rng() % l.images.size()];
        kcache::fuzz::mutate_lean_record(image.lean_flags, image.lean_bytes, image.lean_variables,
                                         rng);
      }
      return;
    case 5:
      if (!l.images.empty() && rng() % 2) {
        l.images.push_back(l.images[rng() % l.images.size()]);  // duplicate arch
      } else if (!l.images.empty()) {
        l.images.erase(l.images.begin() + rng() % l.images.size());
      } else {
        LooseImage image;
        image.arch = pick();
        image.data =
            "\x7f"
            "ELF";
        l.images.push_back(std::move(image));
      }
      return;
    default:
      if (l.names.empty()) l.names.push_back({"f", "_Z1fv"});
      auto& n = l.names[rng() % l.names.size()];
      change(rng() % 2 ? n.first : n.second);
      return;
  }
}

}  // namespace

// Half the time a byte-level mutation with the checksums then made right, half
// the time a field-level one on a leniently decoded bundle.
extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size,
                                          unsigned int seed) {
  std::minstd_rand rng(seed);
  std::string out;
  LooseBundle loose;
  if (rng() % 2 && decode_loose(std::string_view(reinterpret_cast<char*>(data), size), loose)) {
    mutate_fields(loose, rng);
    out = serialize_loose(loose);
  } else {
    size = LLVMFuzzerMutate ? LLVMFuzzerMutate(data, size, max_size) : size;
    out = with_checksums_fixed(std::string(reinterpret_cast<char*>(data), size));
  }
  if (out.size() > max_size) return size;
  std::copy(out.begin(), out.end(), data);
  return out.size();
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string bytes(reinterpret_cast<const char*>(data), size);
  check_parse(bytes);
  std::string fixed = with_checksums_fixed(bytes);
  if (fixed != bytes) check_parse(fixed);
  return 0;
}
