// Sizes and ages as users type them on the command line (ccache's grammar).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace kcache::cli {

// "5G", "500M", "1.5GiB", "750k", "0": K/M/G/T are powers of 1024 (with or
// without "i" and "B"); no unit means G, as in ccache. 0 means no limit.
// Throws InvalidArgument saying what a valid size looks like.
uint64_t parse_size(const std::string& text);

// "3600s", "30m", "12h", "7d"; no suffix means days, as in ccache.
std::chrono::seconds parse_age(const std::string& text);

// "12.3 MiB", "5.0 GiB", "512 bytes".
std::string format_size(uint64_t bytes);

// "1.2 s", "3 min 5 s", "2 h 3 min".
std::string format_duration_ms(int64_t ms);

}  // namespace kcache::cli
