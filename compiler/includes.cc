#include "compiler/includes.h"

#include <sys/stat.h>
#include <time.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <cstdint>
#include <cstdlib>
#include <deque>
#include <map>
#include <optional>
#include <mutex>
#include <set>
#include <unordered_map>

#include "common/error.h"
#include "common/file_system.h"
#include "common/hash.h"
#include "common/paths.h"
#include "common/stamp_trust.h"
#include "compiler/lookup_record.h"

namespace kcache::compiler {
namespace {

// The folder a quoted include is searched in first: its includer's, "" for
// a bare name (join() then leaves the spelling bare, as NVRTC names it).
std::string next_to(const std::string& includer) {
  return has_folder(includer) ? parent_folder(includer) : "";
}

std::string join(const std::string& dir, const std::string& name) {
  if (dir.empty() || name.front() == '/') return name;
  return dir.back() == '/' ? dir + name : dir + "/" + name;
}

}  // namespace

namespace {

struct FileId {
  dev_t dev;
  ino_t ino;
  // Not part of the identity: what tells whether bytes read before still hold.
  off_t size = 0;
  int64_t mtime_ns = 0, ctime_ns = 0;
  bool operator<(const FileId& o) const { return dev != o.dev ? dev < o.dev : ino < o.ino; }
  bool operator==(const FileId& o) const { return dev == o.dev && ino == o.ino; }
  bool same_stamp(const FileId& o) const {
    return *this == o && size == o.size && mtime_ns == o.mtime_ns && ctime_ns == o.ctime_ns;
  }
};

int64_t stamp_ns(const struct timespec& t) {
  return static_cast<int64_t>(t.tv_sec) * 1000000000 + t.tv_nsec;
}

// A regular file (symlinks followed), or nullopt.
// A folder is passed over, as a search passes over a folder of that name; a
// FIFO, device or socket is an IoError naming it: kcache reads headers only
// from regular files (read_input_file: a FIFO would block, /dev/zero never end).
std::optional<FileId> includes_regular_file(const std::string& path) {
  struct stat st;
  if (observed_stat(path, &st) != 0 || S_ISDIR(st.st_mode)) return std::nullopt;
  if (!S_ISREG(st.st_mode)) {
    throw IoError("cannot read " + path + ": it is " + describe_file_type(st.st_mode) +
                  ", not a regular file (kcache reads sources and headers only from regular "
                  "files)");
  }
  return FileId{st.st_dev, st.st_ino, st.st_size, stamp_ns(st.st_mtim), stamp_ns(st.st_ctim)};
}

// ---- What this process read and scanned before --------------------------------
// A long-lived process (the drop-in inside a CuPy program, the Bazel worker,
// prewarm) resolves the same headers for kernel after kernel: CuPy's kernels
// all include carray.cuh and its CCCL. A header's bytes are kept by path with
// the stamp of the stat that found it (device, inode, size, mtime, ctime), so
// the next resolve reads them again only if that stat differs. Bytes are
// kept only where their stamp stands for them (common/stamp_trust.h: older
// than the writeback window, on a file system whose stamps hold): a
// recently written file is read again at every resolve. Scans are kept by the XXH3-128
// of the text scanned: the same bytes scan the same way.
class HeaderMemo {
 public:
  static HeaderMemo& get() {
    static HeaderMemo* memo = new HeaderMemo;  // never freed: outlives static destructors
    return *memo;
  }

  std::optional<std::string> read(const std::string& path, const FileId& found) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = files_.find(path);
      if (it != files_.end() && it->second.stamp.same_stamp(found)) return it->second.content;
    }
    const int64_t read_ns = realtime_now_ns();
    std::optional<std::string> content = read_input_file(path);
    const FileStamp stamp{static_cast<uint64_t>(found.dev), static_cast<uint64_t>(found.ino),
                          static_cast<uint64_t>(found.size), static_cast<uint64_t>(found.mtime_ns),
                          static_cast<uint64_t>(found.ctime_ns)};
    if (content && stamp_stands_for_bytes(stamp, path, read_ns) &&
        static_cast<off_t>(content->size()) == found.size) {
      std::lock_guard<std::mutex> lock(mutex_);
      make_room(content->size());
      bytes_ += content->size();
      auto& item = files_[path];
      bytes_ -= item.content.size();
      item = {found, *content};
    }
    return content;
  }

  ScannedFile scan(std::string_view text, const ScanOptions& options) {
    Hash128 key = xxh3_128(text);
    key.low ^= options.trigraphs ? 1 : 0;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = scans_.find(key);
      if (it != scans_.end()) return it->second;
    }
    ScannedFile scanned = scan_file(text, options);
    std::lock_guard<std::mutex> lock(mutex_);
    if (scans_.size() >= kMaxScans) scans_.clear();
    scans_.emplace(key, scanned);
    return scanned;
  }

 private:
  static constexpr size_t kMaxBytes = size_t{128} << 20;  // CUTLASS's headers: ~30 MiB
  static constexpr size_t kMaxScans = 1 << 16;
  struct Item {
    FileId stamp;
    std::string content;
  };
  struct HashOf {
    size_t operator()(const Hash128& h) const { return static_cast<size_t>(h.low); }
  };
  void make_room(size_t more) {
    if (bytes_ + more <= kMaxBytes) return;
    files_.clear();  // rare (a process that reads past the bound): start over
    bytes_ = 0;
  }
  std::mutex mutex_;
  std::unordered_map<std::string, Item> files_;
  std::unordered_map<Hash128, ScannedFile, HashOf> scans_;
  size_t bytes_ = 0;
};

std::string real_path(const std::string& path) {
  char buf[PATH_MAX];
  return ::realpath(path.c_str(), buf) ? std::string(buf) : path;
}

std::string shown(const std::string& dir) { return dir.empty() ? "." : dir; }

struct Found {
  FileId id;
  std::string path;
  std::string included_from;
  size_t header_index;  // into IncludeGraph::headers
};

}  // namespace

std::string include_next_name(size_t folder, const std::string& name) {
  return std::string(kIncludeNextPrefix) + std::to_string(folder) + "/" + name;
}

namespace {

// Resolves one source's includes (resolve_includes): a queue of files, each
// scanned once per name it is handed under; every path looked at once.
class Resolver {
 public:
  Resolver(std::string_view source, const IncludeSearch& search)
      : source_(source), search_(search) {
    // A -I naming a toolkit include folder (users pass -I <cuda>/include/cccl
    // out of habit) stays the toolkit's: keyed by version, not hashed file by file.
    std::set<std::string> toolkit_real;
    for (const std::string& d : search.toolkit_dirs) toolkit_real.insert(real_path(d));
    for (size_t i = 0; i < search.user_dirs.size(); ++i) {
      if (toolkit_real.count(real_path(search.user_dirs[i]))) continue;
      user_dirs_.push_back(search.user_dirs[i]);
      user_index_.push_back(i);
    }
  }

  IncludeGraph run(const std::string& source_path) {
    // The source is never stat-ed: its text is given (a program's name may
    // name no file), and a header that is the same file is a header like any other.
    queue_.push_back({source_path, kMainSource, search_.root_next_from});
    while (!queue_.empty()) {
      Pending file = queue_.front();
      queue_.pop_front();
      resolve_file(file);
    }
    std::sort(graph_.headers.begin(), graph_.headers.end(),
              [](const ResolvedHeader& a, const ResolvedHeader& b) { return a.name < b.name; });
    for (const auto& t : toolkit_) graph_.toolkit_includes.push_back(t.first);
    add_missing();
    return std::move(graph_);
  }

 private:
  static constexpr size_t kMainSource = SIZE_MAX;
  struct Pending {
    std::string path;
    size_t header_index;  // whose content to scan, or kMainSource
    int next_from;        // where its #include_next continues (IncludeSearch::root_next_from)
  };
  using Rewrites = std::vector<std::pair<const IncludeDirective*, std::string>>;

  static InvalidArgument conflict(const std::string& name, const std::string& first,
                                  const std::string& second) {
    return InvalidArgument(
        "\"" + name + "\" names two different headers: " + first + " and " + second +
        "; NVRTC matches in-memory headers by the name as written, so one compile cannot hold "
        "both. Include one of them by a longer or different path.");
  }

  // ---- The disk, each path looked at once per resolve ----------------------
  // CCCL's headers include the same few hundred names from hundreds of
  // places, and every search walks the -I folders again (a CuPy kernel:
  // 11,000 stats of 1,400 paths). A folder found missing answers for every
  // name beneath it: the search of "cuda/std/detail/__config" through six -I
  // folders mostly meets folders that have no "cuda" at all.
  bool folder_at(const std::string& path) {
    auto it = is_folder_.find(path);
    if (it == is_folder_.end()) {
      struct stat st;
      it = is_folder_.emplace(path, observed_stat(path, &st) == 0 && S_ISDIR(st.st_mode)).first;
    }
    return it->second;
  }
  bool beneath_missing_folder(const std::string& path) const {
    for (size_t slash = path.rfind('/'); slash != std::string::npos && slash > 0;
         slash = path.rfind('/', slash - 1)) {
      auto it = is_folder_.find(path.substr(0, slash));
      if (it != is_folder_.end()) return !it->second;  // the nearest known folder decides
    }
    return false;
  }
  std::optional<FileId> regular_file(const std::string& path) {
    auto it = looked_at_.find(path);
    if (it != looked_at_.end()) return it->second;
    std::optional<FileId> found;
    if (!beneath_missing_folder(path)) {
      found = includes_regular_file(path);
      // Not there: which of its folders are missing too, nearest first.
      for (size_t slash = path.rfind('/'); !found && slash != std::string::npos && slash > 0;
           slash = path.rfind('/', slash - 1)) {
        if (folder_at(path.substr(0, slash))) break;
      }
    }
    return looked_at_.emplace(path, found).first->second;
  }
  // A user file kcache may not read (MayRead) is as good as absent.
  std::optional<FileId> user_file(const std::string& path) {
    if (search_.may_read && !search_.may_read(path)) return std::nullopt;
    return regular_file(path);
  }

  // ---- Handing user headers ----------------------------------------------------
  // A user header found at `user_path` under spelling `name`: handed (once per
  // spelling) and queued for scanning (once per file). False where the name
  // already names another header: the toolkit's, or other bytes.
  bool add_user(const std::string& name, const std::string& user_path, const FileId& id,
                const std::string& from, int next_from) {
    size_t index;
    auto it = found_.find(name);
    if (it != found_.end()) {
      if (it->second.id == id) return true;
      index = it->second.header_index;
      std::optional<std::string> content = HeaderMemo::get().read(user_path, id);
      auto o = original_.find(index);
      if (!content ||
          *content != (o != original_.end() ? o->second : graph_.headers[index].content)) {
        return false;
      }
      // The same bytes under another path: nothing new for NVRTC, but its
      // own relative includes may resolve differently, so it is scanned too.
    } else {
      if (toolkit_.count(name)) return false;
      std::optional<std::string> content = HeaderMemo::get().read(user_path, id);
      if (!content) throw IoError("cannot read " + user_path + ": it vanished while compiling");
      index = graph_.headers.size();
      found_[name] = Found{id, user_path, from, index};
      handed_by_file_.emplace(id, name);
      graph_.headers.push_back({name, user_path, std::move(*content)});
    }
    if (scanned_.insert({id, index}).second) {
      queue_.push_back({user_path, index, next_from});
    }
    return true;
  }
  // The name a user header is handed under where its spelling already names
  // another header (CUTLASS 2.x: "mma.h" next to cutlass/arch/mma_sm70.h, and
  // the toolkit's <mma.h> from cutlass/arch/wmma.h): the name it is handed
  // under already, else its path beneath the -I folder it lies in (the name
  // other includers are likely to use), else one no file has. The includer's
  // directive is rewritten to it, as for #include_next (docs/KEYS.md).
  std::string alias_for(const std::string& name, const std::string& user_path,
                        const FileId& id) const {
    for (const auto& [handed, f] : found_) {
      if (f.id == id) return handed;
    }
    auto free = [&](const std::string& n) { return !found_.count(n) && !toolkit_.count(n); };
    for (const std::string& d : user_dirs_) {
      // "." holds every relative path (the working folder's).
      std::string prefix = d == "." ? "" : d.empty() || d.back() == '/' ? d : d + "/";
      if ((!prefix.empty() || (d == "." && user_path.front() != '/')) &&
          user_path.compare(0, prefix.size(), prefix) == 0) {
        std::string relative = user_path.substr(prefix.size());
        if (relative.find("..") == std::string::npos && free(relative)) return relative;
      }
    }
    std::string alias;
    for (size_t n = 0; alias.empty() || !free(alias); ++n) {
      alias = std::string(kAliasPrefix) + std::to_string(n) + "/" + name;
    }
    return alias;
  }
  std::string hand_user(const std::string& name, const std::string& user_path, const FileId& id,
                        const std::string& from, int next_from) {
    // A file handed already under another spelling ("lib/b.h" and "b.h" from
    // lib/a.h) is included by that name: handed twice, NVRTC would compile it
    // twice, where its #pragma once (by file, as NVRTC on disk) keeps it once
    // (found by a review). Not one that uses #include_next, whose next header
    // depends on the route (one handed text per name).
    // Only in the same folder: a file linked from two folders finds its
    // quoted includes next to each link (NVRTC searches the folder of the
    // name, not of the link's target; found by the second review).
    auto same_file = handed_by_file_.find(id);
    if (!found_.count(name) && same_file != handed_by_file_.end()) {
      const Found& first = found_[same_file->second];
      if (graph_.headers[first.header_index].content.find("include_next") == std::string::npos &&
          real_path(parent_folder(first.path)) == real_path(parent_folder(user_path))) {
        return same_file->second;
      }
    }
    if (add_user(name, user_path, id, from, next_from)) return name;
    std::string alias = alias_for(name, user_path, id);
    if (!add_user(alias, user_path, id, from, next_from)) {
      auto it = found_.find(name);
      throw conflict(name,
                     it != found_.end() ? it->second.path + " (included from " +
                                              it->second.included_from + ")"
                                        : "the toolkit's (included from " + toolkit_[name] + ")",
                     user_path + " (included from " + from + ")");
    }
    return alias;
  }

  // ---- One file ------------------------------------------------------------
  void resolve_file(const Pending& file) {
    const bool is_source = file.header_index == kMainSource;
    // The text this file is handed as, before any rewrite: scanned in place,
    // copied below only for a rewrite (graph_.headers grows meanwhile).
    auto text_of = [&]() -> std::string_view {
      auto o = is_source ? original_.end() : original_.find(file.header_index);
      return is_source ? source_
             : o != original_.end() ? std::string_view(o->second)
                                    : std::string_view(graph_.headers[file.header_index].content);
    };
    ScannedFile scan = HeaderMemo::get().scan(text_of(), search_.scan);
    // #include_next, and an include whose spelling names another header too,
    // rewritten to the name its header is handed under.
    Rewrites rewrites;
    for (const IncludeDirective& d : scan.includes) {
      std::string from = file.path + ":" + std::to_string(d.line);
      std::optional<std::string> rewritten =
          d.next && file.next_from >= 0 && d.name.front() != '/'
              ? std::optional<std::string>(include_next(d, file, from))
              : include(d, next_to(file.path), from);
      if (rewritten) rewrites.push_back({&d, *rewritten});
    }
    if (!rewrites.empty()) rewrite(file, std::string(text_of()), rewrites);
  }

  // GCC's and NVRTC's rule: the search goes on after the folder the current
  // file was found in (docs/KEYS.md, "#include_next"). Returns the directive's
  // rewritten spelling.
  std::string include_next(const IncludeDirective& d, const Pending& file,
                           const std::string& from) {
    std::vector<std::string> searched;
    std::string handed;
    for (size_t k = 0; k < user_dirs_.size() && handed.empty(); ++k) {
      if (user_index_[k] < static_cast<size_t>(file.next_from)) continue;
      searched.push_back(shown(user_dirs_[k]));
      std::string path = join(user_dirs_[k], d.name);
      if (std::optional<FileId> id = user_file(path)) {
        handed = include_next_name(user_index_[k], d.name);
        if (!add_user(handed, path, *id, from, static_cast<int>(user_index_[k]) + 1)) {
          throw conflict(handed, found_[handed].path, path + " (included from " + from + ")");
        }
      }
    }
    bool in_toolkit = false;
    if (handed.empty()) {
      for (const std::string& t : search_.toolkit_dirs) {
        searched.push_back(t);
        if (!in_toolkit && regular_file(join(t, d.name))) in_toolkit = true;
      }
    }
    if (in_toolkit) {
      // "./x.h" is no handed header's name, so NVRTC searches its -I
      // folders, the toolkit's, for it.
      handed = "./" + d.name;
      while (found_.count(handed)) handed = "./" + handed;
      toolkit_.emplace(handed, from);
    } else if (handed.empty()) {
      handed = include_next_name(search_.user_dirs.size(), d.name);
      if (d.probe) probed_.insert(handed);
      missing_.emplace(handed, MissingInclude{handed, from, searched, ""});
    }
    return in_toolkit ? "<" + handed + ">" : "\"" + handed + "\"";
  }

  // An #include (or __has_include) of a file in `dir`: a user header, the
  // toolkit's, or missing. Returns the directive's new spelling where it
  // must be rewritten.
  std::optional<std::string> include(const IncludeDirective& d, const std::string& dir,
                                     const std::string& from) {
    if (search_.in_memory.count(d.name)) return std::nullopt;  // NVRTC is handed it by name
    if (d.probe) probed_.insert(d.name);
    std::vector<std::string> searched;
    std::optional<std::string> user_path;
    std::optional<FileId> id;
    int next_from = -1;  // absolute: #include_next searches from the start
    if (d.name.front() == '/') {
      if ((id = user_file(d.name))) user_path = d.name;
    } else {
      std::vector<std::string> dirs;
      if (!d.angled) dirs.push_back(dir);
      dirs.insert(dirs.end(), user_dirs_.begin(), user_dirs_.end());
      for (size_t k = 0; k < dirs.size(); ++k) {
        searched.push_back(shown(dirs[k]));
        if ((id = user_file(join(dirs[k], d.name)))) {
          user_path = join(dirs[k], d.name);
          // Next to its includer: #include_next goes on with the first -I.
          size_t in_user = k - (d.angled ? 0 : 1);
          next_from = d.angled || k > 0 ? static_cast<int>(user_index_[in_user]) + 1 : 0;
          break;
        }
      }
    }
    if (user_path) {
      std::string handed = hand_user(d.name, *user_path, *id, from, next_from);
      if (handed != d.name) return "\"" + handed + "\"";
      return std::nullopt;
    }
    bool in_toolkit = false;
    for (const std::string& t : search_.toolkit_dirs) {
      searched.push_back(t);
      if (!in_toolkit && regular_file(join(t, d.name))) in_toolkit = true;
    }
    if (in_toolkit) {
      if (found_.count(d.name)) {
        // The spelling names a user header elsewhere: "./x.h" is no handed
        // header's name, so NVRTC searches its -I folders, the toolkit's.
        std::string handed = "./" + d.name;
        while (found_.count(handed)) handed = "./" + handed;
        toolkit_.emplace(handed, from);
        return "<" + handed + ">";
      }
      toolkit_.emplace(d.name, from);
      return std::nullopt;
    }
    missing_.emplace(d.name, MissingInclude{d.name, from, searched, ""});
    return std::nullopt;
  }

  // The file's handed text with `rewrites` applied. Each rewritten directive
  // keeps its line count: the newlines its splices held follow it as
  // splices, so every later line keeps its number.
  void rewrite(const Pending& file, const std::string& text, const Rewrites& rewrites) {
    std::string out;
    size_t at = 0;
    for (const auto& [d, spelling] : rewrites) {
      out.append(text, at, d->begin - at);
      out += (d->probe ? "__has_include(" : "include ") + spelling;
      for (auto n = std::count(text.begin() + d->begin, text.begin() + d->end, '\n'); n > 0; --n) {
        out += "\\\n";
      }
      at = d->end;
    }
    out.append(text, at, std::string::npos);
    if (file.header_index == kMainSource) {
      graph_.root_content = std::move(out);
      return;
    }
    std::string& content = graph_.headers[file.header_index].content;
    auto o = original_.find(file.header_index);
    if (o == original_.end()) {
      original_[file.header_index] = std::move(content);
      content = std::move(out);
    } else if (out != content) {
      // Scanned again from another folder: one handed text must serve both.
      const std::string& name = graph_.headers[file.header_index].name;
      throw InvalidArgument("\"" + name + "\" uses #include_next and is reached both as " +
                            found_[name].path + " and as " + file.path +
                            ", whose next headers differ; NVRTC is handed one text per name. "
                            "Include it by one path.");
    }
  }

  // Includes found nowhere: a stub that says so, unless only probed.
  void add_missing() {
    for (auto& [name, m] : missing_) {
      if (found_.count(name) || toolkit_.count(name)) continue;  // found from another includer
      if (!probed_.count(name)) {
        std::string dirs;
        for (const std::string& s : m.searched) dirs += (dirs.empty() ? "" : ", ") + s;
        std::string what =
            name.compare(0, std::strlen(kIncludeNextPrefix), kIncludeNextPrefix) == 0
                ? "the #include_next of \"" +
                      name.substr(name.find('/', std::strlen(kIncludeNextPrefix)) + 1) + "\""
                : "\"" + name + "\"";
        m.stub = "#error kcache: " + what + " (included from " + m.included_from +
                 ") was not found in: " + dirs + "\n";
      }
      graph_.missing.push_back(std::move(m));
    }
  }

  std::string_view source_;
  const IncludeSearch& search_;
  std::vector<std::string> user_dirs_;
  std::vector<size_t> user_index_;  // each one's place in search_.user_dirs
  std::unordered_map<std::string, std::optional<FileId>> looked_at_;
  std::unordered_map<std::string, bool> is_folder_;  // path -> a folder there
  IncludeGraph graph_;
  std::map<std::string, Found> found_;             // spelling -> user header
  std::map<FileId, std::string> handed_by_file_;   // file -> the first name it is handed under
  std::map<std::string, std::string> toolkit_;     // spelling -> where first included
  std::map<std::string, MissingInclude> missing_;  // spelling -> first place
  std::map<size_t, std::string> original_;         // header index -> its text before a rewrite
  std::set<std::string> probed_;
  // (file, handed name): a file handed under two names (an #include_next
  // through a folder given twice) is two texts, each rewritten for its place.
  std::set<std::pair<FileId, size_t>> scanned_;
  std::deque<Pending> queue_;
};

}  // namespace

IncludeGraph resolve_includes(const std::string& source_path, std::string_view source,
                              const IncludeSearch& search) {
  return Resolver(source, search).run(source_path);
}

}  // namespace kcache::compiler
