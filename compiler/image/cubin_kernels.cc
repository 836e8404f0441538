#include "compiler/image/cubin_kernels.h"

#include <cstdint>
#include <cstring>
#include <optional>

#include "compiler/image/ptx_entries.h"

namespace kcache::compiler {
namespace {

// ELF64 layout (elf.h), read field by field so that no alignment or host
// endianness is assumed.
constexpr size_t kCubinElfHeaderBytes = 64;
constexpr size_t kCubinSectionHeaderBytes = 64;
constexpr size_t kCubinSymbolBytes = 24;
constexpr uint32_t kCubinSymtab = 2;       // SHT_SYMTAB
constexpr uint8_t kCubinFunction = 2;      // STT_FUNC
constexpr uint8_t kCubinEntryFlag = 0x10;  // STO_CUDA_ENTRY

template <typename T>
std::optional<T> cubin_read(std::string_view bytes, uint64_t at) {
  if (at > bytes.size() || bytes.size() - at < sizeof(T)) return std::nullopt;
  T value = 0;
  for (size_t i = 0; i < sizeof(T); ++i) {
    value |= static_cast<T>(static_cast<uint8_t>(bytes[at + i])) << (8 * i);
  }
  return value;
}

struct CubinSection {
  uint32_t type = 0;
  uint32_t link = 0;
  uint64_t offset = 0;
  uint64_t size = 0;
};

std::optional<CubinSection> cubin_section(std::string_view elf, uint64_t table, uint16_t count,
                                          uint32_t index) {
  if (index >= count) return std::nullopt;
  const uint64_t at = table + uint64_t{index} * kCubinSectionHeaderBytes;
  auto type = cubin_read<uint32_t>(elf, at + 4);
  auto offset = cubin_read<uint64_t>(elf, at + 24);
  auto size = cubin_read<uint64_t>(elf, at + 32);
  auto link = cubin_read<uint32_t>(elf, at + 40);
  if (!type || !offset || !size || !link) return std::nullopt;
  if (*offset > elf.size() || *size > elf.size() - *offset) return std::nullopt;
  return CubinSection{*type, *link, *offset, *size};
}

// The NUL-terminated name at `at` in `strings`, bounded.
std::optional<std::string> cubin_name(std::string_view elf, const CubinSection& strings,
                                      uint32_t at) {
  if (at >= strings.size) return std::nullopt;
  std::string_view rest = elf.substr(strings.offset + at, strings.size - at);
  size_t end = rest.find('\0');
  if (end == std::string_view::npos || end == 0 || end > kMaxEntryNameBytes) return std::nullopt;
  return std::string(rest.substr(0, end));
}

}  // namespace

std::vector<std::string> cubin_kernels(std::string_view elf) {
  std::vector<std::string> kernels;
  if (elf.size() < kCubinElfHeaderBytes ||
      elf.substr(0, 4) != std::string_view("\x7f"
                                           "ELF",
                                           4) ||
      elf[4] != 2 || elf[5] != 1) {  // ELFCLASS64, little-endian
    return kernels;
  }
  auto table = cubin_read<uint64_t>(elf, 0x28);
  auto entry_size = cubin_read<uint16_t>(elf, 0x3a);
  auto count = cubin_read<uint16_t>(elf, 0x3c);
  if (!table || !entry_size || !count || *entry_size != kCubinSectionHeaderBytes) return kernels;
  for (uint32_t i = 0; i < *count; ++i) {
    std::optional<CubinSection> symbols = cubin_section(elf, *table, *count, i);
    if (!symbols || symbols->type != kCubinSymtab) continue;
    std::optional<CubinSection> strings = cubin_section(elf, *table, *count, symbols->link);
    if (!strings) return kernels;
    for (uint64_t at = 0; at + kCubinSymbolBytes <= symbols->size; at += kCubinSymbolBytes) {
      const uint64_t s = symbols->offset + at;
      auto name = cubin_read<uint32_t>(elf, s);
      auto info = cubin_read<uint8_t>(elf, s + 4);
      auto other = cubin_read<uint8_t>(elf, s + 5);
      if (!name || !info || !other) return kernels;
      if ((*info & 0xf) != kCubinFunction || !(*other & kCubinEntryFlag)) continue;
      if (std::optional<std::string> n = cubin_name(elf, *strings, *name)) {
        kernels.push_back(std::move(*n));
        if (kernels.size() == kMaxCubinKernels) return kernels;
      }
    }
    return kernels;  // a cubin has one symbol table
  }
  return kernels;
}

}  // namespace kcache::compiler
