// The runtime without a CUDA driver: what a production binary meets on a
// machine without a GPU. $KCACHE_LIBCUDA points the runtime at a library that
// does not exist, so this runs the same on CI and on the GPU machine.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "bundle/bundle.h"
#include "bundle/embedded.h"
#include "common/error.h"
#include "runtime/device.h"
#include "runtime/driver.h"
#include "runtime/module.h"
#include "runtime/registry.h"
#include "runtime/stream.h"

namespace kcache::runtime {
namespace {

constexpr const char* kMissing = "libkcache-test-no-such-driver.so.1";

class NoDriverTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { setenv("KCACHE_LIBCUDA", kMissing, 1); }
};

// Checks the error every entry point must give without a driver.
template <typename F>
void expect_no_driver(F&& f) {
  try {
    f();
    FAIL() << "expected DriverError";
  } catch (const DriverError& e) {
    std::string m = e.what();
    EXPECT_EQ(e.result(), 0);
    EXPECT_EQ(e.kind(), ErrorKind::driver);
    EXPECT_NE(m.find("no CUDA driver found"), std::string::npos) << m;
    EXPECT_NE(m.find(kMissing), std::string::npos) << m;
    EXPECT_NE(m.find("Install the NVIDIA driver"), std::string::npos) << m;
  }
}

std::string valid_bundle() {
  bundle::Bundle b;
  b.source_name = "saxpy.cu";
  b.images.push_back({bundle::ImageKind::ptx, "compute_80", "", ".version 8.0\n"});
  return bundle::serialize(b);
}

TEST_F(NoDriverTest, OpenDriverOnAMissingLibraryIsATypedError) {
  expect_no_driver([] { open_driver(kMissing); });
}

TEST_F(NoDriverTest, ProcessDriverReportsNoDriverAndRetriesEachCall) {
  expect_no_driver([] { driver(); });
  expect_no_driver([] { driver(); });
}

TEST_F(NoDriverTest, EveryEntryPointReportsNoDriver) {
  expect_no_driver([] { Device::count(); });
  expect_no_driver([] { Device d(0); });
  expect_no_driver([] { current_context(); });
  expect_no_driver([] { Stream::create(); });
  expect_no_driver([] { Event::create(); });
  expect_no_driver([] { Module::load_bytes(valid_bundle(), "saxpy.kcb"); });
  expect_no_driver([] { load_all(); });
}

TEST_F(NoDriverTest, ALibraryThatIsNotADriverIsRejected) {
  try {
    open_driver("libm.so.6");
    FAIL() << "expected DriverError";
  } catch (const DriverError& e) {
    EXPECT_EQ(e.result(), 0);
    EXPECT_NE(std::string(e.what()).find("not a CUDA driver library"), std::string::npos)
        << e.what();
  }
}

TEST_F(NoDriverTest, ResultNamesComeFromABuiltInTableWithoutADriver) {
  EXPECT_EQ(result_name(CUDA_ERROR_NOT_READY), "CUDA_ERROR_NOT_READY");
  EXPECT_EQ(result_name(CUDA_ERROR_UNSUPPORTED_PTX_VERSION), "CUDA_ERROR_UNSUPPORTED_PTX_VERSION");
  EXPECT_EQ(result_name(static_cast<CUresult>(12345)), "CUresult 12345");
}

TEST_F(NoDriverTest, DriverErrorsNameTheCallTheSubjectTheResultAndWhatToDo) {
  try {
    throw_driver_error(CUDA_ERROR_NO_BINARY_FOR_GPU, "cuLibraryLoadData", "saxpy.kcb");
  } catch (const DriverError& e) {
    std::string m = e.what();
    EXPECT_EQ(e.result(), CUDA_ERROR_NO_BINARY_FOR_GPU);
    EXPECT_EQ(e.result_name(), "CUDA_ERROR_NO_BINARY_FOR_GPU");
    EXPECT_NE(m.find("cuLibraryLoadData failed on saxpy.kcb: CUDA_ERROR_NO_BINARY_FOR_GPU"),
              std::string::npos)
        << m;
    EXPECT_NE(m.find("rebuild the bundle"), std::string::npos) << m;
  }
}

// Bad bundles are rejected by parsing, before the driver is asked for: the
// same clear error with or without a GPU.
TEST_F(NoDriverTest, TruncatedBundleIsCorruptNotADriverError) {
  std::string bytes = valid_bundle();
  bytes.resize(bytes.size() - 5);
  try {
    Module::load_bytes(bytes, "saxpy.kcb");
    FAIL() << "expected CorruptError";
  } catch (const CorruptError& e) {
    EXPECT_NE(std::string(e.what()).find("saxpy.kcb"), std::string::npos) << e.what();
  }
}

TEST_F(NoDriverTest, FlippedByteInAnImageIsCorrupt) {
  std::string bytes = valid_bundle();
  size_t at = bytes.find(".version");
  ASSERT_NE(at, std::string::npos);
  bytes[at + 1] ^= 0x20;
  EXPECT_THROW(Module::load_bytes(bytes, "saxpy.kcb"), CorruptError);
}

TEST_F(NoDriverTest, NotABundleAtAllIsCorrupt) {
  EXPECT_THROW(Module::load_bytes("\x7f"
                                  "ELF this is a cubin, not a bundle",
                                  "x.kcb"),
               CorruptError);
  EXPECT_THROW(Module::load_bytes("", "empty.kcb"), CorruptError);
}

TEST_F(NoDriverTest, BundleFromANewerKcacheIsAnIncompatibleVersion) {
  std::string bytes = valid_bundle();
  bytes[8] = static_cast<char>(bundle::kFormatVersion + 1);  // format_version, little-endian
  EXPECT_THROW(Module::load_bytes(bytes, "future.kcb"), IncompatibleVersionError);
}

TEST_F(NoDriverTest, MissingKcbFileIsAnIoErrorNamingThePath) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  std::string path = std::string(tmp ? tmp : "/tmp") + "/kcache-no-such-dir/missing.kcb";
  try {
    Module::load_file(path);
    FAIL() << "expected IoError";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
  }
}

// A misspelt symbol is NotFound before the driver is needed, so a machine
// without a GPU shows the mistake, not "no CUDA driver".
TEST_F(NoDriverTest, EmbeddedModuleNamesAMissingBundleBeforeNeedingADriver) {
  static const unsigned char kBytes[16] = {};
  bundle::register_embedded({"kcache_test_linked", kBytes, sizeof(kBytes)});
  try {
    embedded_module("kcache_test_wrong");
    FAIL() << "expected NotFound";
  } catch (const NotFound& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("no embedded bundle kcache_test_wrong"), std::string::npos) << m;
    EXPECT_NE(m.find("kcache_test_linked"), std::string::npos) << m;
  }
  // A linked one gets as far as the driver, which is missing here.
  expect_no_driver([] { embedded_module("kcache_test_linked"); });
}

// The toolkit's stub libcuda (for linking only) answers cuInit with
// CUDA_ERROR_STUB_LIBRARY (34): named, and what to do.
TEST_F(NoDriverTest, TheToolkitsStubLibraryIsNamedAsSuch) {
  if (access(KCACHE_CUDA_STUB, R_OK) != 0) GTEST_SKIP() << "no " << KCACHE_CUDA_STUB;
  try {
    open_driver(KCACHE_CUDA_STUB);
    FAIL() << "the stub opened as a driver";
  } catch (const DriverError& e) {
    std::string m = e.what();
    EXPECT_EQ(e.result(), CUDA_ERROR_STUB_LIBRARY) << m;
    EXPECT_EQ(e.result_name(), "CUDA_ERROR_STUB_LIBRARY") << m;
    EXPECT_NE(m.find("the CUDA toolkit's stub"), std::string::npos) << m;
    EXPECT_EQ(m.find("no description"), std::string::npos) << m;
  }
}

TEST_F(NoDriverTest, UnknownEmbeddedBundleIsNotFoundListingWhatIsLinked) {
  static const unsigned char kBytes[16] = {};
  bundle::register_embedded({"kcache_test_registered", kBytes, sizeof(kBytes)});
  try {
    Module::load_embedded("kcache_test_missing");
    FAIL() << "expected NotFound";
  } catch (const NotFound& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("kcache_test_missing"), std::string::npos) << m;
    EXPECT_NE(m.find("kcache_test_registered"), std::string::npos) << m;
  }
  // A registered bundle that is damaged: corrupt, named as embedded.
  try {
    Module::load_embedded("kcache_test_registered");
    FAIL() << "expected CorruptError";
  } catch (const CorruptError& e) {
    EXPECT_NE(std::string(e.what()).find("embedded bundle kcache_test_registered"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace kcache::runtime
