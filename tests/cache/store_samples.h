// What the store tests share: entries whose every byte says which key they
// belong to (so a wrong or torn payload a get returns is detected), children
// that report instead of throwing, and a second user.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "cache/format/entry.h"
#include "cache/local/store.h"
#include "common/hash.h"

namespace kcache::testing {

// Entries numbered k = 0, 1, ...: key xxh3("<name>-<k>"), a cubin for sm_90,
// and a payload of random bytes seeded by k, `min_size + k * size_step %
// size_spread` bytes long. Each test names its own, so their keys differ.
struct SampleEntries {
  std::string name;
  size_t min_size = 0;
  size_t size_step = 0;
  size_t size_spread = 1;
  uint32_t compile_ms = 0;
  int64_t created_unix_s = 0;

  Hash128 key(int k) const;
  std::string payload(int k) const;  // key k's one right payload
  cache::Entry entry(int k) const;
};

// Store options whose notices go nowhere.
cache::StoreOptions quiet_store_options();

// Runs `body` in a forked child, which exits with what it returns; an
// exception becomes exit code 98 and a line on stderr.
pid_t start_child(const std::function<int()>& body);
// The child's exit code, or 128 + the signal that killed it.
int wait_for(pid_t pid);
// start_child, then wait_for.
int in_child(const std::function<int()>& body);

// Root becomes nobody (65534) for the rest of the process, so that
// permissions apply; false where it cannot (not root).
bool become_nobody();

}  // namespace kcache::testing
