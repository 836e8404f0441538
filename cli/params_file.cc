#include <string>
#include <vector>

#include "cli/command.h"
#include "common/error.h"
#include "common/file_system.h"

namespace kcache::cli {

std::vector<std::string> expand_params_files(int argc, char** argv) {
  return expand_params_files(std::vector<std::string>(argv, argv + argc));
}

std::vector<std::string> expand_params_files(const std::vector<std::string>& args) {
  std::vector<std::string> out;
  for (size_t i = 0; i < args.size(); ++i) {
    std::string arg = args[i];
    if (i == 0 || arg.size() < 2 || arg[0] != '@') {
      out.push_back(std::move(arg));
      continue;
    }
    std::string path = arg.substr(1);
    std::optional<std::string> text = read_file(path);
    if (!text) throw InvalidArgument("params file " + path + " does not exist");
    // Bazel's "multiline" params format: one argument per line, no quoting.
    size_t start = 0;
    while (start < text->size()) {
      size_t end = text->find('\n', start);
      if (end == std::string::npos) end = text->size();
      out.push_back(text->substr(start, end - start));
      start = end + 1;
    }
  }
  return out;
}

}  // namespace kcache::cli
