#include "tests/testing/answer_files.h"

#include <dirent.h>

#include "common/file_system.h"

namespace kcache::testing {
namespace {

std::string printable(std::string t) {
  for (char& c : t) {
    if (c != '\n' && (c < 32 || c > 126)) c = '.';
  }
  return t;
}

bool is_text(const std::string& name) {
  return name.find(".codes") != std::string::npos || name.find(".log") != std::string::npos;
}

}  // namespace

AnswerFiles answer_files(const std::string& dir, const std::function<bool(const std::string&)>& keep) {
  AnswerFiles out;
  DIR* d = ::opendir(dir.c_str());
  if (!d) return out;
  while (dirent* e = ::readdir(d)) {
    std::string name = e->d_name;
    if (name == "." || name == ".." || (keep && !keep(name))) continue;
    out[name] = read_file(dir + "/" + name).value_or("");
  }
  ::closedir(d);
  return out;
}

std::string first_difference(const std::string& got, const std::string& want) {
  size_t at = 0;
  while (at < got.size() && at < want.size() && got[at] == want[at]) ++at;
  const size_t from = at > 60 ? at - 60 : 0;
  return "sizes " + std::to_string(got.size()) + " (kcache) vs " + std::to_string(want.size()) +
         " (NVRTC), first difference at byte " + std::to_string(at) +
         ":\n    kcache: " + printable(got.substr(from, 160)) +
         "\n    NVRTC:  " + printable(want.substr(from, 160));
}

std::string differences(const AnswerFiles& got, const AnswerFiles& want) {
  std::string out;
  for (const auto& [name, bytes] : want) {
    auto it = got.find(name);
    if (it == got.end()) {
      out += "  " + name + " missing\n";
    } else if (it->second != bytes) {
      out += "  " + name + " differs: ";
      out += is_text(name) ? "\n    kcache:\n" + printable(it->second.substr(0, 1500)) +
                                 "\n    NVRTC:\n" + printable(bytes.substr(0, 1500))
                           : first_difference(it->second, bytes);
      out += "\n";
    }
  }
  for (const auto& [name, bytes] : got) {
    if (!want.count(name)) out += "  " + name + " extra (kcache only)\n";
  }
  return out;
}

}  // namespace kcache::testing
