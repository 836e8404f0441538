#include "cache/format/entry.h"

#include <optional>

#include "common/arch.h"
#include "common/bytes.h"
#include "common/error.h"
#include "common/hash.h"
#include "common/safe_path.h"

namespace kcache::cache {
namespace {

constexpr size_t kChecksumSize = 8;
// As in bundles (bundle/bundle.cc): room for CUB-sized names, no more.
constexpr size_t kMaxNameBytes = 64 * 1024;

// Names reach log lines and terminals (`kcache show`): bounded, no control
// characters.
void check_name(const ByteReader& r, std::string_view text, const char* field) {
  if (text.empty()) r.fail(std::string(field) + " is empty");
  if (text.size() > kMaxNameBytes) {
    r.fail(std::string(field) + " is " + std::to_string(text.size()) + " bytes, more than " +
           std::to_string(kMaxNameBytes));
  }
  if (find_control_character(text) != std::string_view::npos) {
    r.fail(std::string(field) + " \"" + escape_for_message(text) + "\" holds a control character");
  }
}

// A log is printed on a hit: one from a remote or an archive must not move
// the terminal (an escape sequence) or fill it. NVRTC's own has lines and
// tabs only.
constexpr size_t kMaxLogBytes = size_t{16} << 20;

std::string log_problem(std::string_view log) {
  if (log.size() > kMaxLogBytes) {
    return "log is " + std::to_string(log.size()) + " bytes, more than " +
           std::to_string(kMaxLogBytes);
  }
  for (unsigned char c : log) {
    if ((c < 0x20 && c != '\n' && c != '\t' && c != '\r') || c == 0x7f) {
      return "log holds the control character " + std::to_string(c);
    }
  }
  return "";
}

// A source's name is printed by `kcache ls`: bounded, no control characters
// (empty: not known).
std::string source_name_problem(std::string_view name) {
  if (name.size() > kMaxNameBytes) {
    return "source name is " + std::to_string(name.size()) + " bytes, more than " +
           std::to_string(kMaxNameBytes);
  }
  if (find_control_character(name) != std::string_view::npos) {
    return "source name \"" + escape_for_message(name) + "\" holds a control character";
  }
  return "";
}

uint8_t kind_byte(TargetKind kind) { return kind == TargetKind::ptx ? 1 : 2; }

// Big-endian halves, so the 16 bytes read like the key's hex form.
void write_key(ByteWriter& w, const Hash128& key) {
  for (uint64_t half : {key.high, key.low}) {
    for (int shift = 56; shift >= 0; shift -= 8) w.u8(static_cast<uint8_t>(half >> shift));
  }
}

Hash128 read_key(ByteReader& r) {
  Hash128 key;
  for (uint64_t* half : {&key.high, &key.low}) {
    for (int i = 0; i < 8; ++i) *half = (*half << 8) | r.u8("key");
  }
  return key;
}

}  // namespace

void write_lowered_names(ByteWriter& w, const std::vector<LoweredName>& names) {
  w.u32(static_cast<uint32_t>(names.size()));
  for (const LoweredName& n : names) {
    w.str(n.name_expression);
    w.str(n.lowered_name);
  }
}

std::vector<LoweredName> read_lowered_names(ByteReader& r) {
  uint32_t count = r.u32("lowered name count");
  // Each name takes at least two length prefixes: a tampered count fails fast.
  if (count > r.remaining() / 8) r.fail("lowered name count past the end");
  std::vector<LoweredName> names;
  for (uint32_t i = 0; i < count; ++i) {
    LoweredName n;
    n.name_expression = std::string(r.str("name expression"));
    n.lowered_name = std::string(r.str("lowered name"));
    names.push_back(std::move(n));
  }
  return names;
}

Entry::Entry(const Hash128& key, TargetKind kind, std::string arch, uint32_t compile_ms,
             int64_t created_unix_s, std::string_view payload,
             std::vector<LoweredName> lowered_names, LeanRecord lean, std::string log,
             std::string source_name)
    : key_(key),
      kind_(kind),
      arch_(std::move(arch)),
      compile_ms_(compile_ms),
      created_unix_s_(created_unix_s),
      lowered_names_(std::move(lowered_names)),
      lean_(lean),
      log_(std::move(log)),
      source_name_(std::move(source_name)) {
  std::string problem = lean_.problem();
  if (problem.empty()) problem = log_problem(log_);
  if (problem.empty()) problem = source_name_problem(source_name_);
  if (!problem.empty()) throw InvalidArgument("cache entry for " + key_.hex() + ": " + problem);
  ByteWriter w;
  w.bytes(kEntryMagic);
  w.u16(kEntryFormatVersion);
  w.u8(kind_byte(kind_));
  w.u8(0);  // reserved
  write_key(w, key_);
  w.str(arch_);
  w.u32(compile_ms_);
  w.u64(static_cast<uint64_t>(created_unix_s_));
  write_lowered_names(w, lowered_names_);
  write_lean_record(w, lean_);
  w.str(log_);
  w.str(source_name_);
  w.u64(payload.size());
  payload_offset_ = w.size();
  payload_size_ = payload.size();
  w.bytes(payload);
  uint64_t checksum = xxh3_64(w.data());
  w.u64(checksum);
  encoded_ = w.take();
}

bool Entry::keeps_log(std::string_view log) { return log_problem(log).empty(); }
bool Entry::keeps_source_name(std::string_view name) {
  return source_name_problem(name).empty();
}

Entry Entry::decode(std::string encoded, const std::string& what) {
  std::string_view bytes(encoded);
  ByteReader r(bytes, what);
  if (bytes.size() < kEntryMagic.size() + kChecksumSize) {
    r.fail(bytes.empty() ? "empty" : "only " + std::to_string(bytes.size()) + " bytes");
  }
  if (r.bytes(kEntryMagic.size(), "magic") != kEntryMagic) r.fail("bad magic");
  uint16_t version = r.u16("format version");
  if (version == 0 || version > kEntryFormatVersion) {
    throw IncompatibleVersionError(what + " has entry format version " + std::to_string(version) +
                                   ", newer than this kcache reads (" +
                                   std::to_string(kEntryFormatVersion) + "); upgrade kcache");
  }
  // Checksum before interpreting the rest, so a damaged length cannot mislead us.
  std::string_view covered = bytes.substr(0, bytes.size() - kChecksumSize);
  ByteReader tail(bytes.substr(covered.size()), what);
  if (tail.u64("checksum") != xxh3_64(covered)) r.fail("checksum mismatch");

  // From here on only the checksummed bytes are read.
  ByteReader body(covered, what);
  body.bytes(kEntryMagic.size() + 2, "magic and version");
  Entry entry;
  entry.format_version_ = version;
  uint8_t kind = body.u8("kind");
  if (kind != 1 && kind != 2) body.fail("unknown kind " + std::to_string(kind));
  entry.kind_ = kind == 1 ? TargetKind::ptx : TargetKind::cubin;
  if (body.u8("reserved") != 0) body.fail("reserved byte set");
  entry.key_ = read_key(body);
  std::string_view arch = body.str("arch");
  std::optional<Arch> parsed = parse_arch(arch);
  if (!parsed) {
    body.fail("arch \"" + escape_for_message(arch) +
              "\" is not an arch (sm_XY, sm_XYa, sm_XYf, compute_XY, ...)");
  }
  if (parsed->is_virtual != (entry.kind_ == TargetKind::ptx)) {
    body.fail(std::string(entry.kind_ == TargetKind::ptx ? "PTX" : "a cubin") + " labelled " +
              std::string(arch) + ", a " + (parsed->is_virtual ? "virtual" : "real") + " arch");
  }
  entry.arch_ = std::string(arch);
  entry.compile_ms_ = body.u32("compile ms");
  entry.created_unix_s_ = static_cast<int64_t>(body.u64("created"));
  uint32_t names = body.u32("lowered name count");
  // Each name takes at least two length prefixes: a tampered count fails fast.
  if (names > body.remaining() / 8) body.fail("lowered name count past the end");
  for (uint32_t i = 0; i < names; ++i) {
    LoweredName n;
    std::string_view expression = body.str("name expression");
    check_name(body, expression, "name expression");
    std::string_view lowered = body.str("lowered name");
    check_name(body, lowered, "lowered name");
    n.name_expression = std::string(expression);
    n.lowered_name = std::string(lowered);
    entry.lowered_names_.push_back(std::move(n));
  }
  entry.lean_ = version >= 2 ? read_lean_record(body) : LeanRecord::unknown_record();
  if (version >= 3) {
    std::string_view log = body.str("log");
    std::string problem = log_problem(log);
    if (!problem.empty()) body.fail(problem);
    entry.log_ = std::string(log);
  }
  if (version >= 4) {
    std::string_view name = body.str("source name");
    std::string problem = source_name_problem(name);
    if (!problem.empty()) body.fail(problem);
    entry.source_name_ = std::string(name);
  }
  uint64_t size = body.u64("payload size");
  if (size != body.remaining()) {
    body.fail("payload size " + std::to_string(size) + " does not match the " +
              std::to_string(body.remaining()) + " bytes present");
  }
  entry.payload_offset_ = body.offset();
  entry.payload_size_ = static_cast<size_t>(size);
  entry.encoded_ = std::move(encoded);
  return entry;
}

}  // namespace kcache::cache
