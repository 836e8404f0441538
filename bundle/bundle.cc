#include "bundle/bundle.h"

#include <optional>
#include <unordered_set>
#include <utility>
#include <vector>

#include "common/arch.h"
#include "common/bytes.h"
#include "common/error.h"
#include "common/hash.h"
#include "common/safe_path.h"

namespace kcache::bundle {
namespace {

constexpr size_t kHeaderSize = 8 + 2 + 2 + 8;
constexpr size_t kChecksumSize = 8;
// kind, arch length, key length, data size, data checksum, NUL (version 1;
// version 2 adds a lean record).
constexpr size_t kMinImageSizeV1 = 1 + 4 + 4 + 8 + 8 + 1;
constexpr uint8_t kMaxKind = static_cast<uint8_t>(ImageKind::cubin);

// The bytes the trailing checksum covers: everything before it but the image
// data, given as [offset, offset + size) regions in ascending order.
std::string without_regions(std::string_view bytes,
                            const std::vector<std::pair<size_t, size_t>>& regions) {
  std::string out;
  size_t pos = 0;
  for (const auto& [offset, size] : regions) {
    out.append(bytes.substr(pos, offset - pos));
    pos = offset + size;
  }
  out.append(bytes.substr(pos));
  return out;
}

constexpr size_t kMaxSourceNameBytes = 4096;
constexpr size_t kMaxCompilerIdentityBytes = 1024;
// Heavily templated (CUB) names run to a few KB; 64 KiB leaves room without
// letting a tampered bundle put megabytes into a log line.
constexpr size_t kMaxNameBytes = 64 * 1024;

// Valid checksums, invalid content: the bundle was made by something else
// than kcache, or tampered with.
[[noreturn]] void invalid(const std::string& what, const std::string& problem) {
  throw CorruptError(what + " is corrupt: " + problem + "; rebuild it with `kcache compile`");
}

// Text that reaches a terminal, a log line or JSON: bounded, no control
// characters (an ESC sequence or a newline could forge output).
void check_text(const std::string& what, std::string_view text, const char* field, size_t max_bytes,
                bool allow_empty) {
  if (text.empty() && !allow_empty) invalid(what, std::string(field) + " is empty");
  if (text.size() > max_bytes) {
    invalid(what, std::string(field) + " is " + std::to_string(text.size()) + " bytes, more than " +
                      std::to_string(max_bytes));
  }
  size_t bad = find_control_character(text);
  if (bad != std::string_view::npos) {
    invalid(what, std::string(field) + " \"" + escape_for_message(text) +
                      "\" holds a control character at byte " + std::to_string(bad));
  }
}

bool is_key_text(std::string_view key) {
  if (key.size() != 32) return false;
  for (char c : key) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

// Every string field against what it may hold (see the grammar in bundle.h).
void check_fields(const std::string& what, const Bundle& bundle) {
  check_text(what, bundle.source_name, "source name", kMaxSourceNameBytes, true);
  check_text(what, bundle.compiler_identity, "compiler identity", kMaxCompilerIdentityBytes, true);
  std::unordered_set<std::string_view> seen_archs;
  for (size_t i = 0; i < bundle.images.size(); ++i) {
    const Image& image = bundle.images[i];
    const std::string which = "image " + std::to_string(i + 1) + " (" + to_string(image.kind) + ")";
    std::optional<Arch> arch = parse_arch(image.arch);
    if (!arch) {
      invalid(
          what,
          which + " arch \"" + escape_for_message(image.arch) +
              "\" is not an arch (sm_XY, sm_XYa, sm_XYf, compute_XY, compute_XYa, compute_XYf)");
    }
    if (arch->is_virtual != (image.kind == ImageKind::ptx)) {
      invalid(what,
              which + " arch " + std::string(image.arch) + " is a " +
                  (arch->is_virtual ? "virtual arch, but a cubin is for a real arch (sm_XY)"
                                    : "real arch, but PTX is for a virtual arch (compute_XY)"));
    }
    if (!seen_archs.insert(image.arch).second) {
      invalid(what, which + " arch " + std::string(image.arch) + " appears twice");
    }
    if (!image.key.empty() && !is_key_text(image.key)) {
      invalid(what, which + " key \"" + escape_for_message(image.key) +
                        "\" is not 32 lower-case hex digits");
    }
    std::string lean_problem = image.lean.problem();
    if (!lean_problem.empty()) invalid(what, which + " " + lean_problem);
  }
  for (const LoweredName& n : bundle.lowered_names) {
    check_text(what, n.name_expression, "name expression", kMaxNameBytes, false);
    check_text(what, n.lowered_name, "lowered name", kMaxNameBytes, false);
  }
}

size_t padding_for(size_t offset) {
  return (kImageAlignment - offset % kImageAlignment) % kImageAlignment;
}

}  // namespace

const char* to_string(ImageKind kind) {
  switch (kind) {
    case ImageKind::ptx:
      return "ptx";
    case ImageKind::cubin:
      return "cubin";
  }
  return "unknown";
}

std::string_view Bundle::lowered(std::string_view name_expression) const {
  for (const LoweredName& n : lowered_names) {
    if (n.name_expression == name_expression) return n.lowered_name;
  }
  return {};
}

std::string serialize(const Bundle& bundle) {
  ByteWriter w;
  w.bytes(kMagic);
  w.u16(kFormatVersion);
  w.u16(0);  // flags
  w.u64(0);  // body size, patched below
  w.str(bundle.source_name);
  w.str(bundle.compiler_identity);
  w.u32(static_cast<uint32_t>(bundle.images.size()));
  std::vector<std::pair<size_t, size_t>> data_regions;
  for (const Image& image : bundle.images) {
    std::string problem = image.lean.problem();
    if (!problem.empty()) {
      throw InvalidArgument("bundle image " + std::string(image.arch) + ": " + problem);
    }
    w.u8(static_cast<uint8_t>(image.kind));
    w.str(image.arch);
    w.str(image.key);
    write_lean_record(w, image.lean);
    w.u64(image.data.size());
    w.u64(xxh3_64(image.data));
    for (size_t pad = padding_for(w.size()); pad > 0; --pad) w.u8(0);
    data_regions.emplace_back(w.size(), image.data.size());
    w.bytes(image.data);
    w.u8(0);
  }
  w.u32(static_cast<uint32_t>(bundle.lowered_names.size()));
  for (const LoweredName& n : bundle.lowered_names) {
    w.str(n.name_expression);
    w.str(n.lowered_name);
  }
  std::string out = w.take();
  uint64_t body_size = out.size() - kHeaderSize;
  for (int i = 0; i < 8; ++i) out[12 + i] = static_cast<char>((body_size >> (8 * i)) & 0xff);
  ByteWriter checksum;
  checksum.u64(xxh3_64(without_regions(out, data_regions)));
  out += checksum.data();
  return out;
}

Bundle parse(std::string_view bytes, const std::string& what) {
  ByteReader r(bytes, what);
  if (bytes.size() < kHeaderSize + kChecksumSize) {
    r.fail("only " + std::to_string(bytes.size()) + " bytes, too short for a kcache bundle");
  }
  if (r.bytes(kMagic.size(), "magic") != kMagic) {
    r.fail("not a kcache bundle (bad magic); was it written by `kcache compile`?");
  }
  Bundle bundle;
  bundle.format_version = r.u16("format version");
  if (bundle.format_version > kFormatVersion || bundle.format_version == 0) {
    throw IncompatibleVersionError(
        what + " has bundle format version " + std::to_string(bundle.format_version) +
        ", this kcache reads up to version " + std::to_string(kFormatVersion) +
        "; rebuild the bundle with this kcache or upgrade the runtime");
  }
  if (r.u16("flags") != 0) r.fail("unknown flags set");
  uint64_t body_size = r.u64("body size");
  if (body_size != bytes.size() - kHeaderSize - kChecksumSize) {
    r.fail("body size " + std::to_string(body_size) + " does not match the file (" +
           std::to_string(bytes.size()) + " bytes); truncated or extended");
  }
  // Every read below is bounds-checked, so the body can be parsed before the
  // checksum that covers its metadata is checked.
  std::string_view covered = bytes.substr(0, bytes.size() - kChecksumSize);
  std::vector<std::pair<size_t, size_t>> data_regions;
  ByteReader body(covered, what);
  body.bytes(kHeaderSize, "header");
  bundle.source_name = body.str("source name");
  bundle.compiler_identity = body.str("compiler identity");
  uint32_t image_count = body.u32("image count");
  std::vector<uint64_t> image_checksums;
  // A tampered count must fail fast instead of reserving or looping for long.
  const size_t min_image_size =
      kMinImageSizeV1 + (bundle.format_version >= 2 ? LeanRecord::kSize : 0);
  if (image_count > body.remaining() / min_image_size) body.fail("image count past the end");
  for (uint32_t i = 0; i < image_count; ++i) {
    Image image;
    uint8_t kind = body.u8("image kind");
    if (kind == 0 || kind > kMaxKind) body.fail("unknown image kind " + std::to_string(kind));
    image.kind = static_cast<ImageKind>(kind);
    image.arch = body.str("image arch");
    image.key = body.str("image key");
    if (bundle.format_version >= 2) {
      // Checked with the other fields, after the checksums (check_fields).
      image.lean.flags = body.u8("lean flags");
      image.lean.bytes_removed = static_cast<int64_t>(body.u64("lean bytes removed"));
      image.lean.variables_removed = body.u32("lean variables removed");
    } else {
      image.lean = LeanRecord::unknown_record();
    }
    uint64_t size = body.u64("image size");
    uint64_t checksum = body.u64("image checksum");
    std::string_view pad = body.bytes(padding_for(body.offset()), "padding");
    if (pad.find_first_not_of('\0') != std::string_view::npos) body.fail("non-zero padding");
    if (size > body.remaining()) body.fail("image size " + std::to_string(size) + " past the end");
    data_regions.emplace_back(body.offset(), static_cast<size_t>(size));
    image.data = body.bytes(static_cast<size_t>(size), "image data");
    if (body.u8("image terminator") != 0) body.fail("image data not NUL-terminated");
    image_checksums.push_back(checksum);
    bundle.images.push_back(image);
  }
  uint32_t name_count = body.u32("lowered name count");
  if (name_count > body.remaining() / 8) body.fail("lowered name count past the end");
  for (uint32_t i = 0; i < name_count; ++i) {
    LoweredName n;
    n.name_expression = body.str("name expression");
    n.lowered_name = body.str("lowered name");
    bundle.lowered_names.push_back(n);
  }
  body.expect_end();
  ByteReader tail(bytes.substr(covered.size()), what);
  if (tail.u64("checksum") != xxh3_64(without_regions(covered, data_regions))) {
    r.fail("checksum mismatch");
  }
  for (size_t i = 0; i < bundle.images.size(); ++i) {
    const Image& image = bundle.images[i];
    if (xxh3_64(image.data) != image_checksums[i]) {
      r.fail(std::string("checksum mismatch in the ") + to_string(image.kind) + " image for " +
             escape_for_message(image.arch));
    }
  }
  check_fields(what, bundle);
  return bundle;
}

}  // namespace kcache::bundle
