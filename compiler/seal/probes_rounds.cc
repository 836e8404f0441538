// What the rest of a compile adds to the last round's classification
// (probes_classify.cc): the toolkit absences a round that asked for an
// include found, the files a serving seal handed NVRTC (keyed by the bytes
// it was served, which no later look at the disk can give), and the probes
// of earlier rounds. Each may contradict what is already there, which means
// the disk changed during the compile: the result is then unkeyable.
#include <algorithm>
#include <climits>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/file_system.h"
#include "common/hash.h"
#include "compiler/seal/probes.h"
#include "compiler/seal/probes_parts.h"
#include "compiler/seal/seal.h"
#include "compiler/time_macros.h"

namespace kcache::compiler::probe_parts {
namespace {

struct TimeMacros {
  bool time = false, date = false;
};

// Which time macros the bytes NVRTC was served use: read again (the
// snapshot's bytes, or it changed: nullopt), once per content and thread
// (no lock: the drop-in's forks take every lock it has). A CUB miss is
// served ~500 headers, the same ones every time.
std::optional<TimeMacros> time_macros_of(const ServedFile& f) {
  thread_local std::map<Hash128, TimeMacros> by_content;
  auto it = by_content.find(f.content);
  if (it != by_content.end()) return it->second;
  std::optional<std::string> content;
  try {
    content = read_input_file(f.path);
  } catch (const Error&) {
    return std::nullopt;
  }
  if (!content || xxh3_128(*content) != f.content) return std::nullopt;
  TimeMacros m{uses_time_macros(*content), uses_date_macro(*content)};
  if (by_content.size() < 100000) by_content.emplace(f.content, m);
  return m;
}

}  // namespace
}  // namespace kcache::compiler::probe_parts

namespace kcache::compiler {

void add_asked_absences(const std::string& spelling, const ProbeContext& c, int64_t started_ns,
                        ClassifiedProbes* into) {
  using namespace probe_parts;
  if (spelling.empty() || spelling.front() == '/' || has_parent_part(spelling)) return;
  for (size_t i = 0; i < c.toolkit_dirs.size(); ++i) {
    cache::ManifestProbe p;
    p.path = kToolkitLabel + std::to_string(i) + ":" + spelling;
    std::optional<DiskPath> disk = disk_path(p.path, c);
    if (!disk) continue;
    if (stat_of(disk->full()).file) {
      into->unkeyable = disk->full() + " appeared while NVRTC compiled";
      continue;
    }
    record_folder(*disk, started_ns, &p);
    auto same = [&](const cache::ManifestProbe& q) { return q.path == p.path; };
    auto it = std::find_if(into->keyed.begin(), into->keyed.end(), same);
    if (it == into->keyed.end()) {
      into->keyed.insert(std::upper_bound(into->keyed.begin(), into->keyed.end(), p,
                                          [](const cache::ManifestProbe& a,
                                             const cache::ManifestProbe& b) {
                                            return a.path < b.path;
                                          }),
                         std::move(p));
    } else if (it->present) {
      into->unkeyable = disk->full() + " appeared while NVRTC compiled";
    }
  }
}

void add_served(const std::vector<ServedFile>& served, const ProbeContext& c, int64_t started_ns,
                ClassifiedProbes* into) {
  using namespace probe_parts;
  auto by_path = [](const cache::ManifestProbe& a, const cache::ManifestProbe& b) {
    return a.path < b.path;
  };
  // Merged into `into->keyed` (sorted by path) at the end: inserted one by
  // one, ~500 served files moved ~1,000 probes each.
  std::map<std::string, cache::ManifestProbe> added;
  for (const ServedFile& f : served) {
    cache::ManifestProbe p;
    p.path = toolkit_name(f.path, c).value_or(f.path);
    p.present = true;
    p.content = f.content;
    p.dev = f.dev;
    p.ino = f.ino;
    p.size = f.size;
    keep_stamp_if_it_stands(f.path, f.mtime_ns, f.ctime_ns, started_ns, &p);
    if (static_cast<int64_t>(std::min<uint64_t>(f.ctime_ns, INT64_MAX)) >= started_ns) {
      into->unkeyable = f.path + " changed while NVRTC compiled";
      continue;
    }
    auto it = std::lower_bound(into->keyed.begin(), into->keyed.end(), p, by_path);
    const cache::ManifestProbe* before =
        it != into->keyed.end() && it->path == p.path ? &*it : nullptr;
    auto again = added.find(p.path);
    if (again != added.end()) before = &again->second;
    if (before) {
      if (!before->present || before->content != p.content) {
        into->unkeyable = f.path + " changed while NVRTC compiled (read twice, or absent first)";
      }
      continue;
    }
    if (c.check_time_macros) {
      std::optional<TimeMacros> macros = time_macros_of(f);
      if (!macros) {
        into->unkeyable = f.path + " changed while NVRTC compiled";
        continue;
      }
      if (macros->time || (!c.date_keyed && macros->date)) {
        into->unkeyable = f.path + " uses a time macro";
        continue;
      }
    }
    std::string path = p.path;
    added.emplace(std::move(path), std::move(p));
  }
  std::vector<cache::ManifestProbe> merged;
  merged.reserve(into->keyed.size() + added.size());
  auto next = added.begin();
  for (cache::ManifestProbe& p : into->keyed) {
    for (; next != added.end() && next->first < p.path; ++next) merged.push_back(std::move(next->second));
    merged.push_back(std::move(p));
  }
  for (; next != added.end(); ++next) merged.push_back(std::move(next->second));
  into->keyed = std::move(merged);
}

void merge_earlier_round(const ClassifiedProbes& earlier, ClassifiedProbes* into) {
  if (!earlier.unkeyable.empty() && into->unkeyable.empty()) into->unkeyable = earlier.unkeyable;
  auto by_path = [](const cache::ManifestProbe& a, const cache::ManifestProbe& b) {
    return a.path < b.path;
  };
  for (const cache::ManifestProbe& p : earlier.keyed) {
    auto it = std::lower_bound(into->keyed.begin(), into->keyed.end(), p, by_path);
    if (it == into->keyed.end() || it->path != p.path) {
      into->keyed.insert(it, p);
    } else if (it->present != p.present || (p.present && it->content != p.content)) {
      into->unkeyable = p.path + " changed between two rounds of NVRTC";
    }
  }
}

}  // namespace kcache::compiler
