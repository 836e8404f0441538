// Storage's write-only probe (cache/storage.h): a remote that takes uploads
// but never returns them is noticed after kWriteOnlyProbeUploads uploads, with
// one warning; a healthy remote costs one lookup per process and no warning.
// Against a real nginx; the REAPI case runs end to end in
// tests/cli/reapi_hostile_test.cc.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cache/storage.h"
#include "tests/testing/http_servers.h"
#include "tests/testing/temp_dir.h"

namespace kcache::cache {
namespace {

using kcache::testing::NginxServer;
using kcache::testing::TempDir;

Entry entry_of(const std::string& name) {
  return Entry(xxh3_128(name), TargetKind::cubin, "sm_90", 1200, 1763769600, "payload of " + name);
}

class WriteOnlyRemoteTest : public ::testing::Test {
 protected:
  std::unique_ptr<Storage> machine(const std::string& url) {
    StorageOptions options;
    options.local_dir = dir_ / "m";
    RemoteOptions remote;
    remote.url = url;
    remote.timeout = std::chrono::milliseconds(5000);
    options.remote = remote;
    options.warn = [this](const std::string& m) { warnings_.push_back(m); };
    return std::make_unique<Storage>(options);
  }
  TempDir dir_;
  std::vector<std::string> warnings_;
};

TEST_F(WriteOnlyRemoteTest, RemoteThatStoresButNeverReturnsIsWarnedOnceAfterItsUploads) {
  // PUT stores (WebDAV); everything else answers 404, as from storage that
  // reads elsewhere than it writes.
  NginxServer nginx(
      "location /wo/ { if ($request_method != PUT) { return 404; } dav_methods PUT; "
      "create_full_put_path on; }");
  auto s = machine(nginx.url("/wo"));
  for (const char* name : {"a", "b", "c", "d"}) s->put(entry_of(name));
  EXPECT_EQ(nginx.count_requests("PUT", "/wo/"), 4);
  EXPECT_EQ(nginx.files().size(), 4u);                                      // it did store them
  EXPECT_EQ(nginx.count_requests("HEAD", "/wo/"), kWriteOnlyProbeUploads);  // then stops asking
  ASSERT_EQ(warnings_.size(), 1u);
  EXPECT_NE(warnings_[0].find("stores but never returns"), std::string::npos) << warnings_[0];
  EXPECT_NE(warnings_[0].find(nginx.url("/wo")), std::string::npos) << warnings_[0];
  EXPECT_TRUE(s->remote_usable());  // only a warning: reads may still find others' entries
}

TEST_F(WriteOnlyRemoteTest, HealthyRemoteIsAskedOnceAndNotWarnedAbout) {
  NginxServer nginx;
  auto s = machine(nginx.url("/kcache"));
  for (const char* name : {"a", "b", "c"}) s->put(entry_of(name));
  EXPECT_EQ(nginx.count_requests("PUT", "/kcache/"), 3);
  EXPECT_EQ(nginx.count_requests("HEAD", "/kcache/"), 1);
  EXPECT_TRUE(warnings_.empty()) << warnings_.front();
}

}  // namespace
}  // namespace kcache::cache
