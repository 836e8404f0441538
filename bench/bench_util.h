// Helpers the benchmarks share: inputs, temporary folders, the plain-read
// baseline and percentiles of per-operation timings.
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

namespace kcache::bench {

using Clock = std::chrono::steady_clock;

// `n` pseudo-random bytes, the same for the same seed.
inline std::string random_bytes(size_t n, uint64_t seed) {
  std::string s(n, '\0');
  std::mt19937_64 rng(seed);
  for (char& c : s) c = static_cast<char>(rng());
  return s;
}

// The p-quantile (0..1) of `samples`.
inline double percentile(std::vector<double> samples, double p) {
  if (samples.empty()) return 0;
  size_t i = static_cast<size_t>(p * static_cast<double>(samples.size() - 1));
  std::nth_element(samples.begin(), samples.begin() + static_cast<std::ptrdiff_t>(i),
                   samples.end());
  return samples[i];
}

inline double since_ns(Clock::time_point start) {
  return std::chrono::duration<double, std::nano>(Clock::now() - start).count();
}

// A new folder under $TMPDIR (or /tmp); remove it with remove_tree.
inline std::string make_temp_dir() {
  const char* base = std::getenv("TMPDIR");
  std::string t = std::string(base ? base : "/tmp") + "/kcache-bench-XXXXXX";
  if (!mkdtemp(t.data())) throw std::runtime_error("mkdtemp failed");
  return t;
}

inline void remove_tree(const std::string& dir) {
  if (std::system(("rm -rf '" + dir + "'").c_str()) != 0) {
    throw std::runtime_error("cannot remove " + dir);
  }
}

// open + fstat + read + close: what any file-backed cache has to pay.
inline std::string plain_read(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw std::runtime_error("cannot open " + path);
  struct stat st;
  ::fstat(fd, &st);
  std::string out(static_cast<size_t>(st.st_size), '\0');
  size_t got = 0;
  while (got < out.size()) {
    ssize_t n = ::read(fd, &out[got], out.size() - got);
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  ::close(fd);
  return out;
}

}  // namespace kcache::bench
