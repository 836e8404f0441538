// The grpc:// remote's headers file: what is accepted, and that everything
// else is a clear error naming the file and line.
#include <gtest/gtest.h>

#include "cache/remote/reapi/headers.h"
#include "common/error.h"

namespace kcache::cache {
namespace {

using Headers = std::vector<std::pair<std::string, std::string>>;

TEST(RemoteHeadersTest, NamesAreLoweredValuesKeptCommentsAndBlanksSkipped) {
  EXPECT_EQ(parse_remote_headers("# BuildBuddy\n\n  X-BuildBuddy-API-Key :  s3cr3t \r\n"
                                 "authorization: Bearer a b c",
                                 "h"),
            (Headers{{"x-buildbuddy-api-key", "s3cr3t"}, {"authorization", "Bearer a b c"}}));
  EXPECT_TRUE(parse_remote_headers("", "h").empty());
}

TEST(RemoteHeadersTest, BadLinesNameTheFileAndLine) {
  auto message = [](const std::string& text) {
    try {
      parse_remote_headers(text, "/run/headers");
    } catch (const InvalidArgument& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_NE(message("ok: 1\nno colon here\n").find("/run/headers:2"), std::string::npos);
  EXPECT_NE(message("bad name: 1").find("bad character"), std::string::npos);
  EXPECT_NE(message("name:").find("empty"), std::string::npos);
  EXPECT_NE(message(": value").find("empty"), std::string::npos);
  EXPECT_NE(message("grpc-timeout: 1S").find("reserved"), std::string::npos);
  EXPECT_NE(message("k: caf\xc3\xa9").find("not printable"), std::string::npos);
}

TEST(RemoteHeadersTest, AtMost64Headers) {
  std::string text;
  for (size_t i = 0; i < kMaxRemoteHeaders; ++i) text += "h" + std::to_string(i) + ": v\n";
  EXPECT_EQ(parse_remote_headers(text, "h").size(), kMaxRemoteHeaders);
  EXPECT_THROW(parse_remote_headers(text + "one: more\n", "h"), InvalidArgument);
}

}  // namespace
}  // namespace kcache::cache
