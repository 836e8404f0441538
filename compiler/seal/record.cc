#include "compiler/seal/record.h"

#include <sys/syscall.h>

#include <unordered_set>

#include "compiler/seal/raw_calls.h"

namespace kcache::compiler::seal {

std::vector<std::string> probes_of(const RecordArena& arena, std::string cwd,
                                   const std::string& chain_root, SealResult* names) {
  std::vector<std::string> probes;
  std::unordered_set<std::string> seen, relative, absolute;
  // A chdir (even one that failed: the record holds no result) makes later
  // relative names not the working folder's, kept absolute (the safe side).
  // fchdir is not watched: NVRTC changes no folder at all (measured), and
  // a library that did would have its relative names taken as the working
  // folder's. A name relative to a folder descriptor whose folder the
  // supervisor could not read has base "?" (record()).
  bool moved = false;
  arena.for_each([&](int32_t nr, std::string_view base, std::string_view path) {
    if (nr < 0) return;  // a served or refused file (served_of)
    std::string p(path);
    const std::string& from = base.empty() ? cwd : std::string(base);
    std::string resolved = p.front() == '/' ? p : resolve_lexically(from, p);
    if (p.front() != '/' && chain_root.empty() && has_parent_part(p)) {
      // A real working folder (serving): ".." kept as the kernel resolved it
      // (through a linked folder, not lexically), as the served files are.
      std::string joined(from.size() + p.size() + 2, '\0');
      joined.resize(join_lexically(from.data(), from.size(), p.data(), p.size(), &joined[0],
                                   joined.size(), /*keep_parents=*/true));
      if (!joined.empty()) resolved = joined;
    }
    bool in_chain =
        !chain_root.empty() && (resolved == chain_root ||
                                resolved.compare(0, chain_root.size() + 1, chain_root + "/") == 0);
    if (!in_chain && chain_root.empty()) {
      const bool by_working_folder = p.front() != '/' && base.empty() && !moved;
      if (by_working_folder ? relative.insert(resolved).second : absolute.insert(resolved).second) {
        (by_working_folder ? names->relative_names : names->absolute_names).push_back(resolved);
      }
    }
    if (nr == SYS_chdir) {
      cwd = resolved;
      moved = true;
    }
    if (!in_chain && seen.insert(resolved).second) probes.push_back(resolved);
  });
  return probes;
}

void served_of(const RecordArena& arena, SealResult* out) {
  std::unordered_set<std::string> hidden;
  arena.for_each([&](int32_t nr, std::string_view base, std::string_view path) {
    if (nr == kHiddenRecord) {
      if (hidden.insert(std::string(path)).second) out->hidden.emplace_back(path);
    } else if (nr == kRefusedRecord && out->refused.empty()) {
      out->refused = std::string(path) + " is " + std::string(base);
    } else if ((nr == kServedRecord || nr == kServedKnownRecord) &&
               base.size() == sizeof(Snapshot)) {
      Snapshot snap;
      std::memcpy(&snap, base.data(), sizeof snap);
      out->served.push_back({std::string(path), snap.content, snap.dev, snap.ino, snap.size,
                             snap.mtime_ns, snap.ctime_ns, nr == kServedKnownRecord});
    }
  });
}

}  // namespace kcache::compiler::seal

namespace kcache::compiler {

std::string resolve_lexically(const std::string& cwd, const std::string& path) {
  std::vector<std::string> parts;
  auto push = [&](const std::string& s) {
    size_t start = 0;
    while (start <= s.size()) {
      size_t end = s.find('/', start);
      if (end == std::string::npos) end = s.size();
      std::string part = s.substr(start, end - start);
      if (part == "..") {
        if (!parts.empty()) parts.pop_back();
      } else if (!part.empty() && part != ".") {
        parts.push_back(part);
      }
      start = end + 1;
    }
  };
  if (path.empty() || path.front() != '/') push(cwd);
  push(path);
  std::string out;
  for (const std::string& p : parts) out += "/" + p;
  return out.empty() ? "/" : out;
}

}  // namespace kcache::compiler
