#include "common/paths.h"

namespace kcache {

std::string parent_folder(std::string_view path) {
  size_t end = path.size();
  while (end > 1 && path[end - 1] == '/') --end;  // "a/b/": the slash belongs to b
  const size_t slash = path.rfind('/', end == 0 ? 0 : end - 1);
  if (slash == std::string_view::npos) return ".";
  size_t folder_end = slash;
  while (folder_end > 0 && path[folder_end - 1] == '/') --folder_end;  // "a//b"
  return folder_end == 0 ? "/" : std::string(path.substr(0, folder_end));
}

bool has_folder(std::string_view path) { return path.find('/') != std::string_view::npos; }

}  // namespace kcache
