// `kcache remote check` and the remote lines of `kcache -s`, run as a user
// runs them, against a real nginx on loopback.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "cache/local/store.h"
#include "tests/testing/http_servers.h"
#include "tests/testing/run_command.h"
#include "tests/testing/temp_dir.h"

namespace kcache::cli {
namespace {

using kcache::testing::CommandResult;
using kcache::testing::NginxServer;
using kcache::testing::TempDir;

class RemoteCommandTest : public ::testing::Test {
 protected:
  CommandResult kcache(std::vector<std::string> args,
                       const std::map<std::string, std::string>& env = {}) {
    args.insert(args.begin(), {kcache::testing::kcache_binary(), "--dir", dir_ / "store"});
    return kcache::testing::run_command(args, env);
  }
  TempDir dir_;
};

TEST_F(RemoteCommandTest, CheckSaysOkWhenReadsAndWritesWork) {
  NginxServer nginx;
  CommandResult r = kcache({"remote", "check", "--remote", nginx.url("/kcache")});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("Verdict:   OK: the remote answers and takes writes"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("(from --remote)"), std::string::npos) << r.out;
  EXPECT_EQ(nginx.count_requests("PUT", "/kcache/"), 1);
  EXPECT_EQ(nginx.count_requests("DELETE", "/kcache/"), 1);
  EXPECT_TRUE(nginx.files().empty());  // the probe was removed
}

TEST_F(RemoteCommandTest, CheckWithSigningAndBazelLayoutFromTheEnvironment) {
  NginxServer nginx;
  kcache::testing::write_file(dir_ / "hmac.key", "a key of thirty-two bytes, or so");
  CommandResult r = kcache({"--format", "json", "remote", "check"},
                           {{"KCACHE_REMOTE", nginx.url("/bazel")},
                            {"KCACHE_REMOTE_LAYOUT", "bazel"},
                            {"KCACHE_REMOTE_HMAC_KEY_FILE", dir_ / "hmac.key"}});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_TRUE(j["ok"]);
  EXPECT_TRUE(j["signing"]);
  EXPECT_EQ(j["layout"], "bazel");
  EXPECT_NE(j["write"]["detail"].get<std::string>().find("signature checked"), std::string::npos);
  EXPECT_EQ(nginx.count_requests("PUT", "/bazel/ac/"), 1);
}

TEST_F(RemoteCommandTest, ReadOnlyCheckNeverWrites) {
  NginxServer nginx;
  CommandResult r = kcache({"remote", "check", "--remote", nginx.url(), "--remote-read-only"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("OK (read-only)"), std::string::npos) << r.out;
  EXPECT_EQ(nginx.count_requests("PUT"), 0);
  EXPECT_EQ(nginx.count_requests("HEAD"), 1);
  EXPECT_TRUE(nginx.files().empty());
}

TEST_F(RemoteCommandTest, CheckFailsWhenTheServerIsDown) {
  const std::string url = "http://127.0.0.1:" + std::to_string(kcache::testing::unused_port());
  CommandResult r = kcache({"remote", "check", "--remote", url});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("FAILED: the remote does not answer"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Couldn't connect"), std::string::npos) << r.out;
}

TEST_F(RemoteCommandTest, CheckFailsWhenWritesAreRefused) {
  NginxServer nginx("location /ro/ { limit_except GET HEAD { deny all; } }");
  CommandResult r = kcache({"remote", "check", "--remote", nginx.url("/ro")});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("FAILED: the remote answers but writes do not work"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("HTTP 403"), std::string::npos) << r.out;
}

TEST_F(RemoteCommandTest, CheckWithoutARemoteIsAUsageError) {
  CommandResult r = kcache({"remote", "check"});
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("no remote cache is configured"), std::string::npos) << r.err;
}

TEST_F(RemoteCommandTest, BadSettingIsAUsageErrorNamingItsOrigin) {
  CommandResult r =
      kcache({"remote", "check", "--remote", "http://x"}, {{"KCACHE_REMOTE_LAYOUT", "s3"}});
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("$KCACHE_REMOTE_LAYOUT"), std::string::npos) << r.err;
}

TEST_F(RemoteCommandTest, ShowStatsListsTheRemoteAndItsCounters) {
  {
    auto store = cache::Store::open(dir_ / "store");
    store->count("remote_hits", 7);
    store->count("remote_rejected", 2);
  }
  CommandResult r = kcache(
      {"-s"}, {{"KCACHE_REMOTE", "http://cache.example/kcache"}, {"KCACHE_REMOTE_READ_ONLY", "1"}});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("Remote:      http://cache.example/kcache (flat layout, read-only)"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("Remote hits:               7"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Remote entries rejected:   2"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Remote errors:             0"), std::string::npos) << r.out;

  r = kcache({"-s", "--format", "json"}, {{"KCACHE_REMOTE", "http://cache.example/kcache"}});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["remote"]["url"], "http://cache.example/kcache");
  EXPECT_EQ(j["counters"]["remote_hits"], 7);
}

TEST_F(RemoteCommandTest, ShowStatsWithoutARemoteHidesUnusedRemoteCounters) {
  CommandResult r = kcache({"-s"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.find("Remote"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace kcache::cli
