// Settings are read in one place (common/environment.h): no source of
// kcache outside common/environment.cc calls getenv or secure_getenv, every
// KCACHE_ variable the code names is on its list, and docs/CLI.md's
// "Environment" table documents exactly that list. Reads the sources from
// the test's runfiles (the `sources` filegroups of each package).
#include <gtest/gtest.h>

#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "common/environment.h"

namespace kcache {
namespace {

// The folders of kcache's own code (tests and benchmarks read the test
// runner's variables, TEST_TMPDIR and the like, and are not kcache).
const char* const kSourceFolders[] = {"bundle",   "cache",      "cli",    "common",
                                      "compiler", "nvrtc_shim", "runtime"};

// Files that still call getenv while others split them; each is to be
// converted to common/environment.h and removed from here.
const std::set<std::string> kNotYetConverted = {};

std::string runfiles_root() {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  const char* workspace = std::getenv("TEST_WORKSPACE");
  return srcdir && workspace ? std::string(srcdir) + "/" + workspace : ".";
}

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

// Every .cc and .h of kcache's code, by its path in the repository.
std::map<std::string, std::string> sources() {
  namespace fs = std::filesystem;
  const std::string root = runfiles_root();
  std::map<std::string, std::string> out;
  for (const char* folder : kSourceFolders) {
    if (!fs::is_directory(root + "/" + folder)) continue;
    for (const fs::directory_entry& e : fs::recursive_directory_iterator(root + "/" + folder)) {
      const std::string ext = e.path().extension().string();
      if ((ext != ".cc" && ext != ".h") || !fs::is_regular_file(e.path())) continue;
      out[e.path().lexically_relative(root).string()] = read_text(e.path().string());
    }
  }
  return out;
}

// Whether the quote at `i` separates digits (1'000'000), not opens a
// character literal (u8'a' opens one).
bool digit_separator(const std::string& text, size_t i) {
  auto hex = [&](size_t at) {
    return at < text.size() && std::isxdigit(static_cast<unsigned char>(text[at]));
  };
  return text[i] == '\'' && i > 0 && hex(i - 1) && hex(i + 1) &&
         (i + 2 >= text.size() || text[i + 2] != '\'');
}

// `text` with comments removed and string and character literals emptied:
// what the compiler sees as code.
std::string code_only(const std::string& text) {
  std::string out;
  for (size_t i = 0; i < text.size();) {
    if (text.compare(i, 2, "//") == 0) {
      i = text.find('\n', i);
      if (i == std::string::npos) break;
    } else if (text.compare(i, 2, "/*") == 0) {
      i = text.find("*/", i + 2);
      i = i == std::string::npos ? text.size() : i + 2;
      out += ' ';
    } else if (text.compare(i, 2, "R\"") == 0) {
      const size_t open = text.find('(', i);
      const std::string close = ")" + text.substr(i + 2, open - i - 2) + "\"";
      i = text.find(close, open);
      i = i == std::string::npos ? text.size() : i + close.size();
      out += "\"\"";
    } else if (digit_separator(text, i)) {
      out += text[i++];
    } else if (text[i] == '"' || text[i] == '\'') {
      const char quote = text[i++];
      while (i < text.size() && text[i] != quote) i += text[i] == '\\' ? 2 : 1;
      ++i;
      out += quote;
      out += quote;
    } else {
      out += text[i++];
    }
  }
  return out;
}

std::set<std::string> listed_names() {
  std::set<std::string> out;
  for (const env::Variable& v : env::variables()) out.insert(v.name);
  return out;
}

TEST(SettingsReadInOnePlaceTest, TheTestSeesKcachesSources) {
  const std::map<std::string, std::string> all = sources();
  EXPECT_GT(all.size(), 100u) << "runfiles at " << runfiles_root();
  for (const char* known : {"common/environment.cc", "nvrtc_shim/shim.cc", "runtime/driver.cc",
                            "cli/main.cc", "compiler/seal/probes_nvrtc_own.cc", "bundle/bundle.cc"}) {
    EXPECT_TRUE(all.count(known)) << known << " is not in the test's runfiles: add its package's "
                                  << "`sources` filegroup to the test's data";
  }
}

TEST(SettingsReadInOnePlaceTest, NoSourceButTheEnvironmentListCallsGetenv) {
  const std::regex call(R"(\b(secure_)?getenv\s*\()");
  std::vector<std::string> callers;
  std::set<std::string> allowed_and_calling;
  for (const auto& [path, text] : sources()) {
    if (path == "common/environment.cc") continue;
    if (!std::regex_search(code_only(text), call)) continue;
    if (kNotYetConverted.count(path)) {
      allowed_and_calling.insert(path);
    } else {
      callers.push_back(path);
    }
  }
  EXPECT_TRUE(callers.empty())
      << "these files call getenv; read the variable through common/environment.h (add it to "
         "the list there and to docs/CLI.md's environment table): "
      << ::testing::PrintToString(callers);
  for (const std::string& path : kNotYetConverted) {
    EXPECT_TRUE(allowed_and_calling.count(path))
        << path << " no longer calls getenv: remove it from kNotYetConverted";
  }
}

TEST(SettingsReadInOnePlaceTest, EveryKcacheVariableTheCodeNamesIsListed) {
  const std::regex literal(R"re("(KCACHE_[A-Z0-9_]+)")re");
  const std::set<std::string> listed = listed_names();
  std::set<std::string> unlisted;
  for (const auto& [path, text] : sources()) {
    for (std::sregex_iterator m(text.begin(), text.end(), literal), end; m != end; ++m) {
      if (!listed.count((*m)[1])) unlisted.insert((*m)[1].str() + " (" + path + ")");
    }
  }
  EXPECT_TRUE(unlisted.empty())
      << "add these to common/environment.cc's list and docs/CLI.md's environment table: "
      << ::testing::PrintToString(unlisted);
}

TEST(SettingsReadInOnePlaceTest, TheDocsEnvironmentTableDocumentsExactlyTheList) {
  const std::string doc = read_text(runfiles_root() + "/docs/CLI.md");
  const size_t section = doc.find("\n## Environment");
  ASSERT_NE(section, std::string::npos) << "docs/CLI.md has no \"## Environment\" section";
  const size_t next = doc.find("\n## ", section + 1);
  const std::string table = doc.substr(section, next == std::string::npos ? next : next - section);
  const std::regex row(R"(\n\| `([A-Z_][A-Z0-9_]*)` \|)");
  std::set<std::string> documented;
  for (std::sregex_iterator m(table.begin(), table.end(), row), end; m != end; ++m) {
    documented.insert((*m)[1]);
  }
  const std::set<std::string> listed = listed_names();
  for (const std::string& name : listed) {
    EXPECT_TRUE(documented.count(name)) << name << " is read but not in docs/CLI.md's table";
  }
  for (const std::string& name : documented) {
    EXPECT_TRUE(listed.count(name))
        << name << " is in docs/CLI.md's table but not in common/environment.cc's list";
  }
}

}  // namespace
}  // namespace kcache
