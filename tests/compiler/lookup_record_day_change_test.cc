// __DATE__ across a day change through lookup records
// (compiler/lookup_record.h): a record may not hand one day's entry on another.
// Each compiles through a store with records and compares with a compile
// through no store.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <string>
#include <thread>

#include "cache/storage.h"
#include "compiler/compiler.h"
#include "compiler/lookup_record.h"
#include "compiler/toolkit.h"
#include "tests/compiler/lookup_record_testing.h"
#include "tests/compiler/test_files.h"

namespace kcache::compiler {
namespace {

using testing::test_dir;
using testing::write;

using testing::age;
using testing::record_hits;

void set_tz(const char* tz) {
  ::setenv("TZ", tz, 1);
  ::tzset();
}

class LookupRecordDayChangeTest : public testing::LookupRecordFixture {
 protected:
  void TearDown() override {
    testing::LookupRecordFixture::TearDown();
    ::unsetenv("TZ");
    ::tzset();
  }
};

const char kStringize[] = "#define STR2(x) #x\n#define STR(x) STR2(x)\n";

// Attempt 1: __DATE__ in a header reached by a computed include (an ask
// replayed through a manifest). full_key keys the date for asked headers
// only in its own copy of the request, so p.request.date stays empty and
// write_lookup_record writes a record; the record key has no date. Another
// day (here: another TZ, 26 hours apart) the record hands the old day's entry.
TEST_F(LookupRecordDayChangeTest, DateMacroInAComputedHeaderAcrossADayChange) {
  set_tz("AAA-14");
  std::string dir = test_dir();
  write(dir, "v7.cuh", "#define V (__DATE__[4] * 1000 + __DATE__[5] * 10 + 3)\n");
  write(dir, "k.cu", std::string(kStringize) +
                         "#include STR(VARIANT.cuh)\nextern \"C\" __global__ void k(int* p) "
                         "{ *p = V; }\n");
  cache::Storage& storage = store_in(dir);
  CompileOptions o;
  o.source_path = dir + "/k.cu";
  o.source_name = "k.cu";
  o.working_folder = dir;
  o.ptx_arch = "compute_80";
  o.defines = {"VARIANT=v7"};
  Toolkit tk = find_toolkit("");
  CompileResult first = Compiler(tk, &storage).compile(o);
  age();
  Compiler(tk, &storage).compile(o);
  Compiler(tk, &storage).compile(o);
  int64_t before = record_hits(storage);
  set_tz("BBB+12");  // 26 hours behind: another __DATE__
  CompileResult got = Compiler(tk, &storage).compile(o);
  CompileResult want = Compiler(tk, nullptr).compile(o);
  EXPECT_NE(first.bundle, want.bundle) << "NVRTC did not see the TZ change";
  EXPECT_EQ(got.bundle, want.bundle) << "record hits " << before << " -> " << record_hits(storage);
}

// Attempt 2: the same with the __DATE__ header included literally (scanned):
// p.request.date is set, so no record may be written.
TEST_F(LookupRecordDayChangeTest, DateMacroInAScannedHeaderAcrossADayChange) {
  set_tz("AAA-14");
  std::string dir = test_dir();
  write(dir, "d.cuh", "#define V (__DATE__[4] * 1000 + __DATE__[5] * 10 + 3)\n");
  write(dir, "k.cu", "#include \"d.cuh\"\nextern \"C\" __global__ void k(int* p) { *p = V; }\n");
  cache::Storage& storage = store_in(dir);
  CompileOptions o;
  o.source_path = dir + "/k.cu";
  o.source_name = "k.cu";
  o.working_folder = dir;
  o.ptx_arch = "compute_80";
  Toolkit tk = find_toolkit("");
  Compiler(tk, &storage).compile(o);
  age();
  Compiler(tk, &storage).compile(o);
  Compiler(tk, &storage).compile(o);
  set_tz("BBB+12");
  CompileResult got = Compiler(tk, &storage).compile(o);
  EXPECT_EQ(got.bundle, Compiler(tk, nullptr).compile(o).bundle);
}

}  // namespace
}  // namespace kcache::compiler
