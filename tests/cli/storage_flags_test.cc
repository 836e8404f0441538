// The storage flags a verb adds, parsed the way `kcache compile` will parse them.
#include "cli/storage_flags.h"

#include <gtest/gtest.h>

#include <CLI/CLI.hpp>
#include <algorithm>

#include "common/error.h"

namespace kcache::cli {
namespace {

// Parses `args` (without the program name) for a verb "compile" that added
// the storage flags, as cli/main.cc does.
GlobalOptions parse(std::vector<std::string> args) {
  GlobalOptions global;
  CLI::App app;
  app.add_option("--dir", global.dir);
  CLI::App* verb = app.add_subcommand("compile");
  add_storage_flags(*verb, global);
  std::reverse(args.begin(), args.end());
  app.parse(args);
  return global;
}

TEST(StorageFlagsTest, FlagsBecomeStorageOptions) {
  GlobalOptions global =
      parse({"--dir", "/store", "compile", "--remote", "http://cache:8080/k/", "--remote-layout",
             "bazel", "--remote-read-only", "--remote-timeout", "750ms", "--remote-retries", "1",
             "--remote-hmac-key-file", "/secrets/hmac"});
  cache::StorageOptions o = storage_options_for(global);
  EXPECT_EQ(o.local_dir, "/store");
  ASSERT_TRUE(o.remote);
  EXPECT_EQ(o.remote->url, "http://cache:8080/k");
  EXPECT_EQ(o.remote->layout, cache::RemoteLayout::bazel);
  EXPECT_TRUE(o.remote->read_only);
  EXPECT_EQ(o.remote->timeout.count(), 750);
  EXPECT_EQ(o.remote->retries, 1);
  EXPECT_EQ(o.remote->hmac_key_file, "/secrets/hmac");
  EXPECT_EQ(storage_config(global).origins.at("remote_layout"), "--remote-layout");
}

TEST(StorageFlagsTest, ReadWriteFlagOverridesTheEnvironment) {
  setenv("KCACHE_REMOTE_READ_ONLY", "1", 1);
  GlobalOptions global =
      parse({"--dir", "/store", "compile", "--remote", "http://cache", "--remote-read-write"});
  EXPECT_FALSE(storage_options_for(global).remote->read_only);
  global = parse({"--dir", "/store", "compile", "--remote", "http://cache"});
  EXPECT_TRUE(storage_options_for(global).remote->read_only);
  unsetenv("KCACHE_REMOTE_READ_ONLY");
}

TEST(StorageFlagsTest, NoFlagsNoRemote) {
  GlobalOptions global = parse({"--dir", "/store", "compile"});
  EXPECT_FALSE(storage_options_for(global).remote);
}

TEST(StorageFlagsTest, BadValueIsInvalidArgument) {
  GlobalOptions global = parse({"--dir", "/store", "compile", "--remote", "cache:8080"});
  EXPECT_THROW(storage_options_for(global), InvalidArgument);
}

}  // namespace
}  // namespace kcache::cli
