// The grpc:// backend's reply bounds (cache/remote/reapi/reapi_backend.cc) must not
// cut off honest replies: the memory quota of a channel grows with the reads
// in flight on it, so many threads fetching large blobs at once through
// BatchReadBlobs all get them, none cut off as "Buffers full" (which would
// drop the remote as a liar). The lies themselves are tested end to end in
// tests/cli/reapi_hostile_test.cc.
#include <gtest/gtest.h>

#include <atomic>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "cache/storage.h"
#include "tests/testing/hostile_reapi_server.h"
#include "tests/testing/temp_dir.h"

namespace kcache::cache {
namespace {

using kcache::testing::HostileReapiServer;
using kcache::testing::TempDir;

Entry entry_of(int i, size_t size) {
  std::string payload(size, '\0');
  std::mt19937 rng(static_cast<unsigned>(i));
  for (char& c : payload) c = static_cast<char>(rng());
  return Entry(xxh3_128("budget " + std::to_string(i)), TargetKind::cubin, "sm_90", 1200,
               1763769600, payload);
}

TEST(ReapiReplyBudgetTest, ManyLargeBatchReadsAtOnceAreAllHits) {
  if (HostileReapiServer::find_python().empty()) {
    GTEST_SKIP() << "the BuildGrid venv is not installed; tools/install_deps.sh installs it";
  }
  HostileReapiServer server("honest");  // batch limit 4 MiB: 3 MiB blobs are batch reads
  TempDir dir;
  std::vector<std::string> warnings;
  auto machine = [&](const std::string& name) {
    StorageOptions options;
    options.local_dir = dir / name;
    RemoteOptions remote;
    remote.url = server.url();
    remote.timeout = std::chrono::seconds(60);  // a loaded machine; not what is tested
    options.remote = remote;
    options.warn = [&](const std::string& m) { warnings.push_back(m); };
    return std::make_unique<Storage>(options);
  };
  constexpr int kThreads = 16;
  std::vector<Entry> entries;
  for (int i = 0; i < kThreads; ++i) entries.push_back(entry_of(i, (3 << 20) + 1000 * i));
  {
    auto writer = machine("writer");
    for (const Entry& e : entries) writer->put(e);
    ASSERT_EQ(writer->local()->stats().counter("remote_stored"), kThreads);
  }
  auto reader = machine("reader");
  std::atomic<int> right{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::optional<Entry> got = reader->get(entries[t].key());
      right += got && got->encoded() == entries[t].encoded();
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(right.load(), kThreads);
  EXPECT_EQ(reader->local()->stats().counter("remote_hits"), kThreads);
  EXPECT_TRUE(warnings.empty()) << warnings.front();
}

}  // namespace
}  // namespace kcache::cache
