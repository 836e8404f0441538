#include "common/bytes.h"

#include <gtest/gtest.h>

#include "common/error.h"

namespace kcache {
namespace {

TEST(BytesTest, RoundTripsEveryWidth) {
  ByteWriter w;
  w.u8(0xab);
  w.u16(0xbeef);
  w.u32(0xdeadbeef);
  w.u64(0x0123456789abcdefULL);
  w.str("hello");
  ByteReader r(w.data(), "test");
  EXPECT_EQ(r.u8("a"), 0xab);
  EXPECT_EQ(r.u16("b"), 0xbeef);
  EXPECT_EQ(r.u32("c"), 0xdeadbeefu);
  EXPECT_EQ(r.u64("d"), 0x0123456789abcdefULL);
  EXPECT_EQ(r.str("e"), "hello");
  r.expect_end();
}

TEST(BytesTest, LittleEndianOnDisk) {
  ByteWriter w;
  w.u32(0x01020304);
  EXPECT_EQ(w.data(), std::string("\x04\x03\x02\x01", 4));
}

TEST(BytesTest, TruncatedReadThrowsCorruptNamingTheField) {
  ByteWriter w;
  w.u32(1000);  // claims 1000 bytes follow
  w.bytes("short");
  ByteReader r(w.data(), "widget");
  try {
    r.str("payload");
    FAIL() << "expected CorruptError";
  } catch (const CorruptError& e) {
    EXPECT_NE(std::string(e.what()).find("widget is corrupt"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("payload"), std::string::npos) << e.what();
  }
}

TEST(BytesTest, TrailingBytesAreCorruption) {
  ByteReader r(std::string_view("xy"), "thing");
  r.u8("x");
  EXPECT_THROW(r.expect_end(), CorruptError);
}

}  // namespace
}  // namespace kcache
