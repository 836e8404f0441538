#include "cache/remote/reapi/headers.h"

#include "common/error.h"

namespace kcache::cache {
namespace {

std::string strip(std::string s) {
  const char* ws = " \t\r\n";
  s.erase(0, s.find_first_not_of(ws) == std::string::npos ? s.size() : s.find_first_not_of(ws));
  s.erase(s.find_last_not_of(ws) + 1);
  return s;
}

}  // namespace

std::vector<std::pair<std::string, std::string>> parse_remote_headers(const std::string& text,
                                                                      const std::string& path) {
  std::vector<std::pair<std::string, std::string>> out;
  size_t begin = 0;
  int line_number = 0;
  while (begin < text.size()) {
    size_t end = text.find('\n', begin);
    if (end == std::string::npos) end = text.size();
    const std::string line = strip(text.substr(begin, end - begin));
    begin = end + 1;
    ++line_number;
    const std::string where = path + ":" + std::to_string(line_number);
    if (line.empty() || line[0] == '#') continue;
    const size_t colon = line.find(':');
    if (colon == std::string::npos) {
      throw InvalidArgument(where + ": expected `name: value` (e.g. x-buildbuddy-api-key: KEY)");
    }
    std::string name = strip(line.substr(0, colon));
    const std::string value = strip(line.substr(colon + 1));
    for (char& c : name) {
      if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
      const bool ok =
          (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.';
      if (!ok) throw InvalidArgument(where + ": header name \"" + name + "\" has a bad character");
    }
    if (name.empty() || value.empty()) {
      throw InvalidArgument(where + ": empty header name or value");
    }
    if (name.rfind("grpc-", 0) == 0) {
      throw InvalidArgument(where + ": header names starting with grpc- are reserved by gRPC");
    }
    for (char c : value) {
      if (c < 0x20 || c > 0x7e) throw InvalidArgument(where + ": header value is not printable");
    }
    if (out.size() == kMaxRemoteHeaders) throw InvalidArgument(path + ": more than 64 headers");
    out.emplace_back(std::move(name), value);
  }
  return out;
}

}  // namespace kcache::cache
