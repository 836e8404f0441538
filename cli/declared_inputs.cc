#include "cli/declared_inputs.h"

#include <sys/stat.h>

namespace kcache::cli {

std::string normalize_path(std::string_view path) {
  bool absolute = !path.empty() && path.front() == '/';
  std::vector<std::string_view> parts;
  size_t kept_up = 0;  // leading ".." of a relative path, at the front of `parts`
  while (!path.empty()) {
    size_t slash = path.find('/');
    std::string_view part = path.substr(0, slash);
    path.remove_prefix(slash == std::string_view::npos ? path.size() : slash + 1);
    if (part.empty() || part == ".") continue;
    if (part == "..") {
      if (parts.size() > kept_up) {
        parts.pop_back();
      } else if (!absolute) {
        parts.push_back(part);
        ++kept_up;
      }
      continue;  // "/.." is "/"
    }
    parts.push_back(part);
  }
  std::string out = absolute ? "/" : "";
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i > 0) out += '/';
    out.append(parts[i]);
  }
  return out.empty() ? "." : out;
}

DeclaredInputs::DeclaredInputs(const std::vector<std::string>& paths, const std::string& execroot)
    : execroot_(normalize_path(execroot)) {
  for (const std::string& p : paths) {
    if (std::optional<std::string> r = relative(p)) paths_.insert(std::move(*r));
  }
}

std::optional<std::string> DeclaredInputs::relative(std::string_view path) const {
  std::string p = normalize_path(path);
  if (p.front() != '/') return p;
  if (p == execroot_) return ".";
  std::string under = execroot_ == "/" ? "/" : execroot_ + "/";
  if (p.compare(0, under.size(), under) != 0) return std::nullopt;
  return p.substr(under.size());
}

bool DeclaredInputs::contains(std::string_view path) const {
  std::optional<std::string> r = relative(path);
  if (!r) return true;  // outside the execroot: see the header
  const std::string& p = *r;
  if (p == ".." || p.compare(0, 3, "../") == 0) return false;
  // The path itself, or a declared folder above it.
  for (std::string_view at = p;;) {
    if (paths_.count(std::string(at))) return true;
    size_t slash = at.rfind('/');
    if (slash == std::string_view::npos) return false;
    at = at.substr(0, slash);
  }
}

compiler::MayRead DeclaredInputs::may_read() const {
  return [this](const std::string& path) {
    if (contains(path)) return true;
    struct stat st;
    if (::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode)) {
      std::lock_guard<std::mutex> lock(mutex_);
      refused_.insert(normalize_path(path));
    }
    return false;
  };
}

std::vector<std::string> DeclaredInputs::refused() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return {refused_.begin(), refused_.end()};
}

}  // namespace kcache::cli
