// What tests of lookup records (compiler/lookup_record.h) share: a "too new"
// margin short enough for a test (50 ms, still above the file systems'
// timestamp granularity), files aged past it, and a store in the test folder.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include "cache/storage.h"
#include "compiler/lookup_record.h"

namespace kcache::compiler::testing {

// Files written before this are past the margin.
inline void age() { std::this_thread::sleep_for(std::chrono::milliseconds(80)); }

inline int64_t record_hits(cache::Storage& s) {
  return s.local()->stats().counter("lookup_record_hits");
}

class LookupRecordFixture : public ::testing::Test {
 protected:
  void SetUp() override { set_too_new_margin_for_testing(int64_t{50} * 1000000); }
  void TearDown() override { set_too_new_margin_for_testing(int64_t{2} * 1000000000); }

  // A store in dir/store, once every file written so far is aged: the store
  // makes a folder in `dir`, whose stamp must be old as well.
  cache::Storage& store_in(const std::string& dir) {
    age();
    cache::StorageOptions so;
    so.local_dir = dir + "/store";
    storage_ = std::make_unique<cache::Storage>(so);
    age();
    return *storage_;
  }

 private:
  std::unique_ptr<cache::Storage> storage_;
};

}  // namespace kcache::compiler::testing
