// parse_cannot_open (compiler/includes.h) on arbitrary logs: never crashes,
// and what it returns is taken from the log itself.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "compiler/includes.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view log(reinterpret_cast<const char*>(data), size);
  auto a = kcache::compiler::parse_cannot_open(log);
  if (!a) return 0;
  if (a->name.empty() || log.find("\"" + a->name + "\"") == std::string_view::npos ||
      log.find(a->includer + "(" + std::to_string(a->line) + "): ") == std::string_view::npos ||
      a->line < 0) {
    std::abort();
  }
  return 0;
}
