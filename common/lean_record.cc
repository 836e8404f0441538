#include "common/lean_record.h"

#include <cstdio>

#include "common/bytes.h"

namespace kcache {
namespace {

std::string hex_flags(uint8_t flags) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "0x%02x", flags);
  return buf;
}

// 1234567 -> "1,234,567"
std::string with_commas(uint64_t n) {
  std::string digits = std::to_string(n);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

}  // namespace

std::string LeanRecord::problem() const {
  constexpr uint8_t kAskedLean = kAsked | kLean;
  constexpr uint8_t kAskedDeclined = kAsked | kDeclined;
  if (flags != 0 && flags != kAsked && flags != kAskedLean && flags != kAskedDeclined &&
      flags != kUnknown) {
    return "lean flags " + hex_flags(flags) +
           " are not one of 0x00 (off), 0x01, 0x03, 0x05 (asked: nothing removed, lean, "
           "declined) or 0x08 (unknown)";
  }
  if (bytes_removed > kMaxBytesRemoved || bytes_removed < -kMaxBytesRemoved) {
    return "lean bytes removed " + std::to_string(bytes_removed) + " is beyond +/-" +
           std::to_string(kMaxBytesRemoved);
  }
  if (lean()) {
    if (variables_removed == 0) return "lean variables removed is 0 for a lean image";
  } else if (bytes_removed != 0 || variables_removed != 0) {
    return "lean bytes removed " + std::to_string(bytes_removed) + " and variables removed " +
           std::to_string(variables_removed) + " with flags " + hex_flags(flags) +
           ", which say the image is NVRTC's (both must be 0)";
  }
  return {};
}

void write_lean_record(ByteWriter& w, const LeanRecord& record) {
  w.u8(record.flags);
  w.u64(static_cast<uint64_t>(record.bytes_removed));
  w.u32(record.variables_removed);
}

LeanRecord read_lean_record(ByteReader& r) {
  LeanRecord record;
  record.flags = r.u8("lean flags");
  record.bytes_removed = static_cast<int64_t>(r.u64("lean bytes removed"));
  record.variables_removed = r.u32("lean variables removed");
  std::string problem = record.problem();
  if (!problem.empty()) r.fail(problem);
  return record;
}

const char* state_name(const LeanRecord& record) {
  if (record.unknown()) return "unknown";
  if (!record.asked()) return "off";
  if (record.declined()) return "not_applied";
  return record.lean() ? "lean" : "nothing_to_remove";
}

std::string describe(const LeanRecord& record) {
  if (record.unknown()) return "unknown (format 1)";
  if (!record.asked()) return "off (NVRTC's bytes)";
  if (record.declined()) return "not applied (NVRTC's bytes)";
  if (!record.lean()) return "nothing to remove";
  int64_t b = record.bytes_removed;
  std::string bytes = b >= 0 ? "-" + with_commas(static_cast<uint64_t>(b))
                             : "+" + with_commas(static_cast<uint64_t>(-b));
  return bytes + " B, -" + with_commas(record.variables_removed) +
         (record.variables_removed == 1 ? " variable" : " variables");
}

}  // namespace kcache
