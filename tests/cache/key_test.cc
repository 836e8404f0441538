#include "cache/format/key.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <functional>
#include <set>

#include "tests/cache/key_sample.h"

namespace kcache::cache {
namespace {

using testing::sample_request;

std::string run_key_printer() {
  FILE* p = popen("tests/cache/key_printer", "r");
  if (p == nullptr) return "popen failed";
  char buf[128] = {};
  std::string out = std::fgets(buf, sizeof buf, p) ? buf : "";
  pclose(p);
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

TEST(KeyTest, IsThirtyTwoHexDigits) { EXPECT_EQ(compute_key(sample_request()).hex().size(), 32u); }

TEST(KeyTest, SameRequestGivesSameKeyInAnotherProcess) {
  std::string here = compute_key(sample_request()).hex();
  EXPECT_EQ(run_key_printer(), here);
  EXPECT_EQ(run_key_printer(), here);
}

TEST(KeyTest, ChangingAnySingleFieldChangesTheKey) {
  const std::vector<std::pair<const char*, std::function<void(CompileRequest&)>>> edits = {
      {"compiler identity", [](CompileRequest& r) { r.compiler_identity += "1"; }},
      {"target kind", [](CompileRequest& r) { r.target = TargetKind::ptx; }},
      {"arch", [](CompileRequest& r) { r.arch = "sm_90a"; }},
      {"option value", [](CompileRequest& r) { r.options[1] = "-DN=5"; }},
      {"option added", [](CompileRequest& r) { r.options.push_back("-G"); }},
      {"option order", [](CompileRequest& r) { std::swap(r.options[0], r.options[1]); }},
      {"source name", [](CompileRequest& r) { r.source_name = "other.cu"; }},
      {"source byte", [](CompileRequest& r) { r.source.back() = ' '; }},
      {"header content", [](CompileRequest& r) { r.headers[0].content += " "; }},
      {"header name", [](CompileRequest& r) { r.headers[0].include_name = "util2.cuh"; }},
      {"header added",
       [](CompileRequest& r) {
         r.headers.push_back({"more.cuh", ""});
       }},
      {"header removed", [](CompileRequest& r) { r.headers.clear(); }},
      {"name expression", [](CompileRequest& r) { r.name_expressions[0] = "scale<double>"; }},
      {"name expression added", [](CompileRequest& r) { r.name_expressions.push_back("f"); }},
      {"image pass", [](CompileRequest& r) { r.image_pass = "lean-v1"; }},
      {"asked include", [](CompileRequest& r) { r.asked_includes = {"v7.cuh\nk.cu\nquoted"}; }},
      {"asked include's includer",
       [](CompileRequest& r) { r.asked_includes = {"v7.cuh\nutil.cuh\nquoted"}; }},
  };
  std::set<std::string> keys = {compute_key(sample_request()).hex()};
  for (const auto& [what, edit] : edits) {
    CompileRequest r = sample_request();
    edit(r);
    EXPECT_TRUE(keys.insert(compute_key(r).hex()).second)
        << "editing the " << what << " did not give a new key";
  }
}

TEST(KeyTest, FieldBoundariesAreUnambiguous) {
  // Moving bytes from one field to the next must not collide.
  CompileRequest a = sample_request(), b = sample_request();
  a.options = {"-DA", "B"};
  b.options = {"-DAB"};
  EXPECT_NE(compute_key(a), compute_key(b));
  a = sample_request();
  b = sample_request();
  a.headers = {{"ab", "c"}};
  b.headers = {{"a", "bc"}};
  EXPECT_NE(compute_key(a), compute_key(b));
}

TEST(KeyTest, NoImagePassKeepsTheKeyOfNvrtcBytes) {
  // An empty image pass is NVRTC's bytes exactly: the serialization (and so
  // every key stored before lean images) does not change.
  CompileRequest r = sample_request();
  r.image_pass.clear();
  EXPECT_EQ(serialize_for_key(r).find("image-pass"), std::string::npos);
  r.image_pass = "lean-v1";
  EXPECT_NE(serialize_for_key(r).find("image-pass"), std::string::npos);
}

TEST(KeyTest, NoAskedIncludesKeepsTheScannerKey) {
  // Only a result that needed asked headers keys its asks: every other key
  // (and every key stored before manifests) is unchanged.
  CompileRequest r = sample_request();
  EXPECT_EQ(serialize_for_key(r).find("asked-includes"), std::string::npos);
  r.asked_includes = {"v7.cuh\nk.cu\nquoted"};
  EXPECT_NE(serialize_for_key(r).find("asked-includes"), std::string::npos);
}

}  // namespace
}  // namespace kcache::cache
