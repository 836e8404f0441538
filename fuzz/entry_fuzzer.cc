// Fuzzes cache::Entry::decode, which reads bytes from the local store's blob
// files, from `kcache import` archives and from remote servers that may lie.
// Beyond "no crash, no sanitizer report, only kcache::Error on bad input",
// checks what decode promises: the payload view lies inside the entry, and an
// accepted entry encodes back to exactly the same bytes.
//
// Each input is also tried with its trailing checksum recomputed, so that
// mutations reach the field parsing behind the checksum gate. A structure-aware
// mutator (LLVMFuzzerCustomMutator) changes one field of a leniently decoded
// entry (arch, kind, a lowered name, the lean record of format 2) to a hostile
// or mutated value and re-encodes it with a valid checksum, as a lying remote
// would; an accepted entry must then have an arch of the grammar that matches
// its kind, names without control characters and a lean record of one of its
// forms (common/lean_record.h); a format 1 entry's record must read as unknown.
// The log of format 3 is printed on a hit: an accepted one holds no control
// character but lines and tabs (the mutator plants escape sequences), and an
// older entry has none.
#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "cache/format/entry.h"
#include "common/arch.h"
#include "common/error.h"
#include "common/hash.h"
#include "common/lean_record.h"
#include "common/safe_path.h"
#include "fuzz/lean_record_mutation.h"

extern "C" size_t LLVMFuzzerMutate(uint8_t* data, size_t size, size_t max_size)
    __attribute__((weak));

namespace {

void check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "entry_fuzzer: broken promise: %s\n", what);
    std::abort();
  }
}

void check_decode(const std::string& bytes) {
  try {
    kcache::cache::Entry e = kcache::cache::Entry::decode(bytes, "fuzz input");
    std::string_view payload = e.payload();
    check(payload.data() >= e.encoded().data() &&
              payload.data() + payload.size() <= e.encoded().data() + e.encoded().size(),
          "payload inside the entry");
    check(e.lean().problem().empty(), "the lean record is one of its forms");
    check(kcache::cache::Entry::keeps_log(e.log()), "the log holds no control character");
    check(kcache::cache::Entry::keeps_source_name(e.source_name()), "the source name is kept as it is");
    kcache::cache::Entry again(e.key(), e.kind(), e.arch(), e.compile_ms(), e.created_unix_s(),
                               payload, e.lowered_names(), e.lean(), e.log(), e.source_name());
    if (e.format_version() == kcache::cache::kEntryFormatVersion) {
      check(again.encoded() == bytes, "encode(decode(x)) == x");
    } else {
      check(e.source_name().empty(), "an entry older than format 4 has no source name");
      if (e.format_version() < 3) check(e.log().empty(), "an entry older than format 3 has no log");
      if (e.format_version() == 1) {
        check(e.lean().unknown(), "a format 1 entry's lean is unknown");
        check(kcache::cache::Entry::decode(again.encoded()).lean().unknown(),
              "a format 1 entry re-encodes with its lean record unknown");
      }
    }
    std::optional<kcache::Arch> arch = kcache::parse_arch(e.arch());
    check(arch.has_value(), "arch follows the grammar");
    check(arch->is_virtual == (e.kind() == kcache::cache::TargetKind::ptx), "kind matches arch");
    for (const kcache::cache::LoweredName& n : e.lowered_names()) {
      check(kcache::find_control_character(n.name_expression) == std::string::npos &&
                kcache::find_control_character(n.lowered_name) == std::string::npos,
            "no control characters in names");
    }
  } catch (const kcache::Error&) {
    // CorruptError or IncompatibleVersionError: what bad input must give.
  }
}

// The fields of an entry, read without checks (the grammar in entry.h).
struct LooseEntry {
  uint8_t kind = 2;
  kcache::Hash128 key;
  std::string arch;
  uint32_t compile_ms = 0;
  int64_t created = 0;
  std::vector<kcache::cache::LoweredName> names;
  // Raw (unchecked) lean record fields; a format 1 entry has none.
  uint8_t lean_flags = 0;
  uint64_t lean_bytes = 0;
  uint32_t lean_variables = 0;
  std::string log;  // format 3
  std::string payload;
};

bool decode_loose(std::string_view b, LooseEntry& out) {
  size_t pos = 10;
  if (b.size() < pos + 8) return false;
  const unsigned version = static_cast<unsigned char>(b[8]) | static_cast<unsigned char>(b[9]) << 8;
  const size_t end = b.size() - 8;
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
  uint64_t kind, reserved, ms, created, count;
  if (!u(1, kind) || !u(1, reserved) || end - pos < 16) return false;
  for (uint64_t* half : {&out.key.high, &out.key.low}) {
    for (int i = 0; i < 8; ++i) *half = (*half << 8) | static_cast<unsigned char>(b[pos++]);
  }
  if (!str(out.arch) || !u(4, ms) || !u(8, created) || !u(4, count)) return false;
  for (uint64_t i = 0; i < count && i < 64; ++i) {
    kcache::cache::LoweredName n;
    if (!str(n.name_expression) || !str(n.lowered_name)) return false;
    out.names.push_back(std::move(n));
  }
  if (version >= 2) {
    uint64_t flags, bytes, variables;
    if (!u(1, flags) || !u(8, bytes) || !u(4, variables)) return false;
    out.lean_flags = static_cast<uint8_t>(flags);
    out.lean_bytes = bytes;
    out.lean_variables = static_cast<uint32_t>(variables);
  }
  if (version >= 3 && !str(out.log)) return false;
  uint64_t size;
  if (!u(8, size)) return false;
  out.kind = static_cast<uint8_t>(kind);
  out.compile_ms = static_cast<uint32_t>(ms);
  out.created = static_cast<int64_t>(created);
  out.payload.assign(b.substr(pos, std::min<uint64_t>(size, end - pos)));
  return true;
}

const std::string kValues[] = {"../../pwned",
                               "/etc/passwd",
                               ".",
                               "..",
                               "",
                               "sm_90\n",
                               std::string("sm_90\0x", 7),
                               "\x1b[2J",
                               "compute_90",
                               "compute_100f",
                               "sm_80",
                               "sm_90a",
                               "sm_100f",
                               "sm_9000",
                               "scale<float>",
                               "_Z5scaleIfEvPT_S0_i",
                               "a\nb",
                               "\x7f",
                               "k.cu(3): warning #177-D: unused\n",
                               "line\rcarriage\ttab\n"};

// `entry` (encoded with an empty log) with its lean record replaced by raw
// fields and its log by raw bytes (which Entry itself refuses to write when
// they are not one of the forms, or hold a control character), and the
// checksum recomputed.
std::string with_raw_lean(std::string entry, size_t payload_size, uint8_t flags, uint64_t bytes,
                          uint32_t variables, const std::string& log) {
  const size_t log_at = entry.size() - 8 - payload_size - 8 - 4;
  std::string raw_log(4, '\0');
  for (int i = 0; i < 4; ++i) raw_log[i] = static_cast<char>(log.size() >> (8 * i));
  entry.replace(log_at, 4, raw_log + log);
  const size_t at = log_at - kcache::LeanRecord::kSize;
  std::string record(kcache::LeanRecord::kSize, '\0');
  record[0] = static_cast<char>(flags);
  for (int i = 0; i < 8; ++i) record[1 + i] = static_cast<char>(bytes >> (8 * i));
  for (int i = 0; i < 4; ++i) record[9 + i] = static_cast<char>(variables >> (8 * i));
  entry.replace(at, record.size(), record);
  uint64_t sum = kcache::xxh3_64(std::string_view(entry).substr(0, entry.size() - 8));
  for (int i = 0; i < 8; ++i) entry[entry.size() - 8 + i] = static_cast<char>(sum >> (8 * i));
  return entry;
}

}  // namespace

// Half the time a byte-level mutation with the checksum made right, half the
// time a field-level one re-encoded by Entry itself.
extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size,
                                          unsigned int seed) {
  std::minstd_rand rng(seed);
  std::string out;
  LooseEntry l;
  if (rng() % 2 && decode_loose(std::string_view(reinterpret_cast<char*>(data), size), l)) {
    auto pick = [&]() -> const std::string& { return kValues[rng() % std::size(kValues)]; };
    auto change = [&](std::string& s) {
      if (rng() % 2 || !LLVMFuzzerMutate) return void(s = pick());
      const size_t n = s.size(), max = n * 2 + 16;
      s.resize(max);
      s.resize(LLVMFuzzerMutate(reinterpret_cast<uint8_t*>(s.data()), n, max));
    };
    switch (rng() % 6) {
      case 0:
      case 1:
        change(l.arch);
        break;
      case 5:
        change(l.log);
        break;
      case 2:
        l.kind = static_cast<uint8_t>(1 + rng() % 2);
        break;
      case 3:
        kcache::fuzz::mutate_lean_record(l.lean_flags, l.lean_bytes, l.lean_variables, rng);
        break;
      default:
        if (l.names.empty()) l.names.push_back({"f", "_Z1fv"});
        auto& n = l.names[rng() % l.names.size()];
        change(rng() % 2 ? n.name_expression : n.lowered_name);
    }
    out = with_raw_lean(
        kcache::cache::Entry(
            l.key, l.kind == 1 ? kcache::cache::TargetKind::ptx : kcache::cache::TargetKind::cubin,
            l.arch, l.compile_ms, l.created, l.payload, l.names)
            .encoded(),
        l.payload.size(), l.lean_flags, l.lean_bytes, l.lean_variables, l.log);
  } else {
    size = LLVMFuzzerMutate ? LLVMFuzzerMutate(data, size, max_size) : size;
    out.assign(reinterpret_cast<char*>(data), size);
    if (out.size() >= 8) {
      uint64_t sum = kcache::xxh3_64(std::string_view(out).substr(0, out.size() - 8));
      for (int i = 0; i < 8; ++i) out[out.size() - 8 + i] = static_cast<char>(sum >> (8 * i));
    }
  }
  if (out.size() > max_size) return size;
  std::copy(out.begin(), out.end(), data);
  return out.size();
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string bytes(reinterpret_cast<const char*>(data), size);
  check_decode(bytes);
  if (bytes.size() >= 8) {
    std::string fixed = bytes;
    uint64_t sum = kcache::xxh3_64(std::string_view(fixed).substr(0, fixed.size() - 8));
    for (int i = 0; i < 8; ++i) fixed[fixed.size() - 8 + i] = static_cast<char>(sum >> (8 * i));
    if (fixed != bytes) check_decode(fixed);
  }
  return 0;
}
