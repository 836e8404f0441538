#include "tests/cache/store_samples.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <exception>
#include <random>

namespace kcache::testing {

constexpr uid_t kNobody = 65534;

Hash128 SampleEntries::key(int k) const { return xxh3_128(name + "-" + std::to_string(k)); }

std::string SampleEntries::payload(int k) const {
  std::string p(min_size + static_cast<size_t>(k) * size_step % size_spread, '\0');
  std::mt19937 rng(static_cast<unsigned>(k));
  for (char& c : p) c = static_cast<char>(rng());
  return p;
}

cache::Entry SampleEntries::entry(int k) const {
  return cache::Entry(key(k), cache::TargetKind::cubin, "sm_90", compile_ms, created_unix_s,
                      payload(k));
}

cache::StoreOptions quiet_store_options() {
  cache::StoreOptions options;
  options.warn = [](const std::string&) {};
  return options;
}

pid_t start_child(const std::function<int()>& body) {
  std::fflush(nullptr);
  pid_t pid = fork();
  if (pid == 0) {
    int code = 99;
    try {
      code = body();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "child %d: %s\n", getpid(), e.what());
      code = 98;
    }
    std::fflush(nullptr);
    _exit(code);
  }
  return pid;
}

int wait_for(pid_t pid) {
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

int in_child(const std::function<int()>& body) { return wait_for(start_child(body)); }

bool become_nobody() { return setgid(kNobody) == 0 && setuid(kNobody) == 0; }

}  // namespace kcache::testing
