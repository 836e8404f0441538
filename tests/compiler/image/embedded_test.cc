// Generated C++ (from codegen, built by a genrule) compiles warning-free under
// -pedantic, holds exactly the bundle's bytes, aligned, and registers itself.
#include "bundle/embedded.h"

#include <gtest/gtest.h>

#include <cstdint>

#include "bundle/bundle.h"
#include "tests/compiler/image/embed_sample.h"
#include "tests/compiler/image/embedded_sample.h"

namespace kcache::compiler {
namespace {

TEST(EmbeddedTest, GeneratedSourceHoldsTheBundleBytesExactly) {
  const bundle::EmbeddedBundle& e = kcache_test::nested::sample_bundle();
  std::string expected = testing::sample_bundle();
  ASSERT_EQ(e.size, expected.size());
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(e.data), e.size), expected);
  EXPECT_STREQ(e.symbol, "kcache_test::nested::sample_bundle");
}

TEST(EmbeddedTest, ImagesInTheEmbeddedBytesAreAligned) {
  const bundle::EmbeddedBundle& e = kcache_test::nested::sample_bundle();
  EXPECT_EQ(reinterpret_cast<uintptr_t>(e.data) % bundle::kImageAlignment, 0u);
  bundle::Bundle b = bundle::parse(std::string_view(reinterpret_cast<const char*>(e.data), e.size),
                                   "embedded bundle");
  ASSERT_EQ(b.images.size(), 2u);
  for (const bundle::Image& image : b.images) {
    EXPECT_EQ(reinterpret_cast<uintptr_t>(image.data.data()) % bundle::kImageAlignment, 0u);
  }
  EXPECT_EQ(b.lowered("scale<float>"), "_Z5scaleIfEvPT_S0_i");
}

TEST(EmbeddedTest, RegistersItselfAtStaticInitialization) {
  const bundle::EmbeddedBundle* found = bundle::find_embedded("kcache_test::nested::sample_bundle");
  ASSERT_NE(found, nullptr);
  EXPECT_EQ(found->data, kcache_test::nested::sample_bundle().data);
}

}  // namespace
}  // namespace kcache::compiler
