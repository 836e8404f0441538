// Storage settings: flags, then the environment, then kcache.conf, then defaults.
#include "cache/config.h"

#include <gtest/gtest.h>

#include <map>
#include <set>

#include "common/environment.h"
#include "common/error.h"
#include "tests/testing/temp_dir.h"

namespace kcache::cache {
namespace {

using kcache::testing::TempDir;
using kcache::testing::write_file;

class ConfigTest : public ::testing::Test {
 protected:
  // Resolves with `env_` as the whole environment.
  StorageConfig resolve(const std::map<std::string, std::string>& flags = {}) {
    return resolve_storage_config(flags, [this](const char* name) -> const char* {
      auto it = env_.find(name);
      return it == env_.end() ? nullptr : it->second.c_str();
    });
  }
  std::string store() const { return dir_ / "store"; }
  void store_config(const std::string& text) {
    std::string cmd = "mkdir -p '" + store() + "'";
    ASSERT_EQ(std::system(cmd.c_str()), 0);
    write_file(store() + "/kcache.conf", text);
  }
  // The message of the InvalidArgument that resolving throws.
  std::string error(const std::map<std::string, std::string>& flags = {}) {
    try {
      resolve(flags);
    } catch (const InvalidArgument& e) {
      return e.what();
    }
    ADD_FAILURE() << "no InvalidArgument";
    return "";
  }

  TempDir dir_;
  std::map<std::string, std::string> env_{{"HOME", "/home/ci"}};
};

TEST_F(ConfigTest, NothingSetMeansDefaultFolderAndNoRemote) {
  StorageConfig c = resolve();
  EXPECT_EQ(c.options.local_dir, "/home/ci/.cache/kcache");
  EXPECT_FALSE(c.options.remote);
  EXPECT_TRUE(c.config_file.empty());
  EXPECT_TRUE(c.origins.empty());
  env_["XDG_CACHE_HOME"] = "/xdg";
  EXPECT_EQ(resolve().options.local_dir, "/xdg/kcache");
}

TEST_F(ConfigTest, EnvironmentConfiguresEverySetting) {
  env_ = {{"KCACHE_DIR", store()},
          {"KCACHE_REMOTE", "http://cache:8080/kcache/"},
          {"KCACHE_REMOTE_LAYOUT", "bazel"},
          {"KCACHE_REMOTE_READ_ONLY", "yes"},
          {"KCACHE_REMOTE_TIMEOUT", "2.5s"},
          {"KCACHE_REMOTE_CONNECT_TIMEOUT", "300ms"},
          {"KCACHE_REMOTE_RETRIES", "0"},
          {"KCACHE_REMOTE_TOKEN_FILE", "/secrets/token"},
          {"KCACHE_REMOTE_HMAC_KEY_FILE", "/secrets/hmac"}};
  StorageConfig c = resolve();
  EXPECT_EQ(c.options.local_dir, store());
  ASSERT_TRUE(c.options.remote);
  const RemoteOptions& r = *c.options.remote;
  EXPECT_EQ(r.url, "http://cache:8080/kcache");
  EXPECT_EQ(r.layout, RemoteLayout::bazel);
  EXPECT_TRUE(r.read_only);
  EXPECT_EQ(r.timeout.count(), 2500);
  EXPECT_EQ(r.connect_timeout.count(), 300);
  EXPECT_EQ(r.retries, 0);
  EXPECT_EQ(r.bearer_token_file, "/secrets/token");
  EXPECT_EQ(r.hmac_key_file, "/secrets/hmac");
  EXPECT_EQ(c.origins.at("remote"), "$KCACHE_REMOTE");
}

TEST_F(ConfigTest, StoreConfigFileIsReadAndItsRelativePathsAreItsOwn) {
  store_config(
      "# shared by the CI fleet\n"
      "remote = http://cache/kcache\n"
      "  remote_layout=flat  \n"
      "\n"
      "remote_timeout = 3\n"
      "remote_hmac_key_file = keys/hmac\n");
  env_["KCACHE_DIR"] = store();
  StorageConfig c = resolve();
  EXPECT_EQ(c.config_file, store() + "/kcache.conf");
  ASSERT_TRUE(c.options.remote);
  EXPECT_EQ(c.options.remote->url, "http://cache/kcache");
  EXPECT_EQ(c.options.remote->timeout.count(), 3000);
  EXPECT_EQ(c.options.remote->hmac_key_file, store() + "/keys/hmac");
  EXPECT_EQ(c.origins.at("remote_timeout"), store() + "/kcache.conf:5");
}

TEST_F(ConfigTest, GrpcRemoteSettingsComeFromTheFileAndTheEnvironment) {
  store_config(
      "remote = grpcs://cache.example:443\n"
      "remote_instance_name = kernels\n"
      "remote_tls_ca_file = certs/ca.pem\n"
      "remote_tls_client_cert_file = certs/client.pem\n"
      "remote_tls_client_key_file = certs/client.key\n");
  env_["KCACHE_DIR"] = store();
  env_["KCACHE_REMOTE_HEADERS_FILE"] = "/run/secrets/headers";
  StorageConfig c = resolve();
  ASSERT_TRUE(c.options.remote);
  EXPECT_EQ(c.options.remote->url, "grpcs://cache.example:443");
  EXPECT_EQ(c.options.remote->instance_name, "kernels");
  EXPECT_EQ(c.options.remote->tls_ca_file, store() + "/certs/ca.pem");
  EXPECT_EQ(c.options.remote->tls_client_cert_file, store() + "/certs/client.pem");
  EXPECT_EQ(c.options.remote->tls_client_key_file, store() + "/certs/client.key");
  EXPECT_EQ(c.options.remote->headers_file, "/run/secrets/headers");
  EXPECT_EQ(c.origins.at("remote_headers_file"), "$KCACHE_REMOTE_HEADERS_FILE");
}

TEST_F(ConfigTest, FlagsBeatEnvironmentBeatsFile) {
  store_config(
      "remote = http://from-file\n"
      "remote_layout = bazel\n"
      "remote_read_only = true\n");
  env_["KCACHE_DIR"] = store();
  env_["KCACHE_REMOTE"] = "http://from-env";
  env_["KCACHE_REMOTE_READ_ONLY"] = "false";
  StorageConfig c = resolve({{"remote", "http://from-flag"}});
  EXPECT_EQ(c.options.remote->url, "http://from-flag");
  EXPECT_FALSE(c.options.remote->read_only);                 // env over file
  EXPECT_EQ(c.options.remote->layout, RemoteLayout::bazel);  // file, nothing above it
  EXPECT_EQ(c.origins.at("remote"), "--remote");
  EXPECT_EQ(c.origins.at("remote_read_only"), "$KCACHE_REMOTE_READ_ONLY");
  EXPECT_EQ(c.origins.at("remote_layout"), store() + "/kcache.conf:2");

  c = resolve({{"remote_read_only", "true"}, {"dir", dir_ / "other"}});
  EXPECT_TRUE(c.options.remote->read_only);
  EXPECT_EQ(c.options.local_dir, dir_ / "other");
  EXPECT_EQ(c.options.remote->url, "http://from-env");  // the file is the other store's
}

TEST_F(ConfigTest, EmptyEnvironmentVariableCountsAsUnset) {
  store_config("remote = http://from-file\n");
  env_["KCACHE_DIR"] = store();
  env_["KCACHE_REMOTE"] = "";
  EXPECT_EQ(resolve().options.remote->url, "http://from-file");
}

TEST_F(ConfigTest, RemoteOffOverridesLowerLayers) {
  store_config("remote = http://from-file\n");
  env_["KCACHE_DIR"] = store();
  env_["KCACHE_REMOTE"] = "off";
  EXPECT_FALSE(resolve().options.remote);
  env_.erase("KCACHE_REMOTE");
  EXPECT_FALSE(resolve({{"remote", "off"}}).options.remote);
  EXPECT_TRUE(resolve().options.remote);
}

TEST_F(ConfigTest, KcacheConfigNamesTheFileAndMaySetTheFolder) {
  write_file(dir_ / "ci.conf", "dir = cache-here\nremote = http://cache\n");
  env_["KCACHE_CONFIG"] = dir_ / "ci.conf";
  StorageConfig c = resolve();
  EXPECT_EQ(c.config_file, dir_ / "ci.conf");
  EXPECT_EQ(c.options.local_dir, dir_ / "cache-here");
  EXPECT_EQ(c.options.remote->url, "http://cache");
  env_["KCACHE_DIR"] = "/explicit";
  EXPECT_EQ(resolve().options.local_dir, "/explicit");
}

TEST_F(ConfigTest, MissingKcacheConfigFileIsAnError) {
  env_["KCACHE_CONFIG"] = dir_ / "absent.conf";
  EXPECT_THROW(resolve(), IoError);
}

TEST_F(ConfigTest, StoreConfigFileCannotMoveTheStore) {
  store_config("dir = /elsewhere\n");
  env_["KCACHE_DIR"] = store();
  EXPECT_NE(error().find("kcache.conf:1"), std::string::npos);
}

TEST_F(ConfigTest, UnknownKeyNamesFileAndLine) {
  store_config("remote = http://x\nremote_layuot = bazel\n");
  env_["KCACHE_DIR"] = store();
  std::string message = error();
  EXPECT_NE(message.find("kcache.conf:2"), std::string::npos) << message;
  EXPECT_NE(message.find("remote_layuot"), std::string::npos) << message;
  store_config("just words\n");
  EXPECT_NE(error().find("expected `key = value`"), std::string::npos);
}

// ccache's `sloppiness = time_macros` (compiler/time_macros.h), from each layer.
TEST_F(ConfigTest, SloppinessTimeMacrosFromFileEnvironmentAndFlag) {
  EXPECT_FALSE(resolve().options.sloppy_time_macros);
  env_["KCACHE_DIR"] = store();
  store_config("sloppiness = time_macros\n");
  StorageConfig c = resolve();
  EXPECT_TRUE(c.options.sloppy_time_macros);
  EXPECT_EQ(c.origins.at("sloppiness"), store() + "/kcache.conf:1");
  store_config("# none\n");
  env_["KCACHE_SLOPPINESS"] = "time_macros";
  EXPECT_TRUE(resolve().options.sloppy_time_macros);
  env_.erase("KCACHE_SLOPPINESS");
  EXPECT_TRUE(resolve({{"sloppiness", " time_macros, "}}).options.sloppy_time_macros);
  EXPECT_FALSE(resolve({{"sloppiness", ""}}).options.sloppy_time_macros);
  EXPECT_NE(error({{"sloppiness", "time_macros,pch_defines"}}).find("--sloppiness"),
            std::string::npos);
}

// ccache's `umask`: octal, from the store's file or the environment.
TEST_F(ConfigTest, UmaskIsOctalFromFileOrEnvironmentAndABadOneIsRefused) {
  EXPECT_FALSE(resolve().options.umask);
  env_["KCACHE_DIR"] = store();
  store_config("umask = 002\n");
  StorageConfig c = resolve();
  ASSERT_TRUE(c.options.umask);
  EXPECT_EQ(*c.options.umask, 02u);
  env_["KCACHE_UMASK"] = "0027";
  EXPECT_EQ(*resolve().options.umask, 027u);
  env_["KCACHE_UMASK"] = "0o22";
  EXPECT_NE(error().find("$KCACHE_UMASK"), std::string::npos);
}

TEST_F(ConfigTest, BadValuesSayWhereTheyCameFrom) {
  env_["KCACHE_REMOTE"] = "http://x";
  env_["KCACHE_REMOTE_LAYOUT"] = "s3";
  EXPECT_NE(error().find("$KCACHE_REMOTE_LAYOUT"), std::string::npos);
  env_.erase("KCACHE_REMOTE_LAYOUT");
  for (const char* bad : {"0", "-1s", "fast", "10 s", "3h"}) {
    std::string message = error({{"remote_timeout", bad}});
    EXPECT_NE(message.find("--remote-timeout"), std::string::npos) << bad << ": " << message;
  }
  EXPECT_NE(error({{"remote_read_only", "maybe"}}).find("true or false"), std::string::npos);
  EXPECT_NE(error({{"remote_retries", "many"}}).find("--remote-retries"), std::string::npos);
  std::string message = error({{"remote", "http://ci:hunter2@cache"}});
  EXPECT_EQ(message.find("hunter2"), std::string::npos) << message;
  EXPECT_NE(message.find("--remote"), std::string::npos) << message;
}

TEST_F(ConfigTest, NeverFailingVariantFallsBackToTheLocalStore) {
  auto getenv = [this](const char* name) -> const char* {
    auto it = env_.find(name);
    return it == env_.end() ? nullptr : it->second.c_str();
  };
  env_["KCACHE_DIR"] = store();
  env_["KCACHE_REMOTE"] = "http://cache";
  std::vector<std::string> warnings;
  auto warn = [&](const std::string& m) { warnings.push_back(m); };
  StorageOptions o = storage_options_or_local_only(warn, getenv);
  EXPECT_TRUE(o.remote);
  EXPECT_TRUE(warnings.empty());

  env_["KCACHE_REMOTE_TIMEOUT"] = "soon";
  o = storage_options_or_local_only(warn, getenv);
  EXPECT_FALSE(o.remote);
  EXPECT_EQ(o.local_dir, store());
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("$KCACHE_REMOTE_TIMEOUT"), std::string::npos) << warnings[0];
}

TEST_F(ConfigTest, EveryVariableTheSettingsReadIsOnTheEnvironmentList) {
  std::set<std::string> asked;
  resolve_storage_config({{"dir", store()}}, [&](const char* name) -> const char* {
    asked.insert(name);
    return nullptr;
  });
  EXPECT_GT(asked.size(), 15u);
  for (const std::string& name : asked) {
    EXPECT_NO_THROW(env::read(name.c_str())) << name << " is not in common/environment.cc's list";
  }
}

TEST_F(ConfigTest, EnvVarNames) {
  EXPECT_EQ(env_var_for("remote_hmac_key_file"), "KCACHE_REMOTE_HMAC_KEY_FILE");
  EXPECT_EQ(env_var_for("dir"), "KCACHE_DIR");
}

}  // namespace
}  // namespace kcache::cache
