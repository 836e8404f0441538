// What the seal costs per file NVRTC opens (issue 27), without NVRTC: every
// file beneath FOLDER (default: the toolkit's CCCL headers) opened, read to
// its end and closed, on one thread
//   plain     with no seal
//   recorded  under the seal that records (Landlock lets it read FOLDER; the
//             supervisor answers each open and stat with "continue")
//   served    under the serving seal (the supervisor opens each file, copies
//             it into a sealed memfd, hashes it and installs it)
// plus one stat of each file and of an absent name next to it (an include
// search's probes). Prints the median of ROUNDS runs per mode and the cost
// per file over `plain`.
//
//   bazel run -c opt //bench:seal_serve_bench -- [FOLDER] [ROUNDS]
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "compiler/seal/seal.h"

namespace {

void list(const std::string& dir, std::vector<std::string>* out) {
  DIR* d = ::opendir(dir.c_str());
  if (!d) return;
  while (dirent* e = ::readdir(d)) {
    std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    std::string path = dir + "/" + name;
    struct stat st;
    if (::lstat(path.c_str(), &st) != 0) continue;
    if (S_ISDIR(st.st_mode)) list(path, out);
    if (S_ISREG(st.st_mode)) out->push_back(path);
  }
  ::closedir(d);
}

size_t read_all(const std::vector<std::string>& files) {
  size_t bytes = 0;
  char buf[65536];
  for (const std::string& f : files) {
    struct stat st;
    ::stat(f.c_str(), &st);
    ::stat((f + ".absent").c_str(), &st);
    int fd = ::open(f.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;) bytes += static_cast<size_t>(n);
    ::close(fd);
  }
  return bytes;
}

}  // namespace

int main(int argc, char** argv) {
  using kcache::compiler::SealPolicy;
  const std::string folder = argc > 1 ? argv[1] : "/usr/local/cuda/include/cccl";
  const int rounds = argc > 2 ? std::atoi(argv[2]) : 5;
  std::vector<std::string> files;
  list(folder, &files);
  std::printf("%zu files beneath %s, %d rounds\n", files.size(), folder.c_str(), rounds);
  std::string why;
  if (!kcache::compiler::seal_available(&why)) {
    std::printf("no seal here: %s\n", why.c_str());
    return 1;
  }
  auto time = [&](const char* mode) {
    std::vector<double> ms;
    size_t bytes = 0;
    for (int r = 0; r < rounds; ++r) {
      auto start = std::chrono::steady_clock::now();
      if (std::string(mode) == "plain") {
        bytes = read_all(files);
      } else {
        SealPolicy policy;
        policy.one_cpu = true;  // as NVRTC runs
        if (std::string(mode) == "recorded") {
          policy.readable = {folder};
        } else {
          policy.serve = true;
        }
        kcache::compiler::SealResult result =
            kcache::compiler::run_sealed(policy, [&] { bytes = read_all(files); });
        if (!result.sealed) std::printf("not sealed: %s\n", result.why.c_str());
      }
      ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() -
                                                             start)
                       .count());
    }
    std::sort(ms.begin(), ms.end());
    return std::make_pair(ms[ms.size() / 2], bytes);
  };
  auto plain = time("plain");
  std::printf("%-9s %9.1f ms  %zu bytes\n", "plain", plain.first, plain.second);
  for (const char* mode : {"recorded", "served"}) {
    auto t = time(mode);
    std::printf("%-9s %9.1f ms  %zu bytes  +%.1f us per file\n", mode, t.first, t.second,
                (t.first - plain.first) * 1000 / static_cast<double>(files.size()));
  }
  return 0;
}
