#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <exception>
#include <functional>
#include <future>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "bundle/bundle.h"
#include "cache/format/lookup_note.h"
#include "cache/format/manifest.h"
#include "cache/format/program_record.h"
#include "common/arch.h"
#include "common/bytes.h"
#include "common/environment.h"
#include "common/error.h"
#include "common/file_system.h"
#include "common/hash.h"
#include "compiler/compiler.h"
#include "compiler/compiler_parts.h"
#include "compiler/image/lean_image.h"
#include "compiler/includes.h"
#include "compiler/lookup_record.h"
#include "compiler/nvrtc/nvrtc.h"
#include "compiler/nvrtc/nvrtc_pool.h"
#include "compiler/nvrtc/nvrtc_worker.h"
#include "compiler/nvrtc/pch.h"
#include "compiler/seal/probes.h"
#include "compiler/seal/seal.h"
#include "compiler/served_keys.h"
#include "compiler/time_macros.h"
#include "compiler/undeclared.h"

namespace kcache::compiler {
namespace {

// KCACHE_DEBUG_NAME_CHECK: what differed between a program's answer and its
// answer in another folder, for looking into one kept under its name.
void print_name_check(const std::string& name, const cache::ProgramRecord& a,
                      const cache::ProgramRecord& b) {
  std::fprintf(stderr, "name check %s: result %u/%u\n", name.c_str(), a.compile_result,
               b.compile_result);
  for (size_t i = 0; i < cache::kProgramOutputs; ++i) {
    const std::string& x = a.outputs[i].bytes;
    const std::string& y = b.outputs[i].bytes;
    if (x == y) continue;
    size_t at = 0;
    while (at < x.size() && at < y.size() && x[at] == y[at]) ++at;
    size_t from = at > 80 ? at - 80 : 0;
    std::fprintf(stderr, "  output %zu differs at %zu: [%s] vs [%s]\n", i, at,
                 x.substr(from, 200).c_str(), y.substr(from, 200).c_str());
  }
  std::fprintf(stderr, "  log A:\n%s\n  log B:\n%s\n", a.log.substr(0, 3000).c_str(),
               b.log.substr(0, 3000).c_str());
}

// Served (NVRTC read the disk): whether two compiles of one program under two
// names, in folders `a_folder` and `b_folder` (the second a folder that
// exists nowhere: other_program_name; the working folder the same), named the
// same paths once the second's folder is written as the first's, and found
// nothing in their folders. Only then does the answer depend on the
// program's folder by names taken from it alone, each absent, so the entry
// is every folder's with those names keyed relative to it
// (relative_to_program_folder). A name beneath the first's folder that the
// second compile made by the same absolute name is not (only) the folder's:
// it stays absolute in the key (`out`), and where the first compile found a
// file by the folder (a quoted include) the second compile's absent name in
// its own folder makes the two differ; a name reached by climbing out of the
// folder (`..`) is another path from the other folder. NVRTC's own paths
// (`c`) are left out: they differ between two compile processes.
bool same_paths_in_both_folders(const NvrtcOutput& a, const std::string& a_folder,
                                const NvrtcOutput& b, const std::string& b_folder,
                                const ProbeContext& c, NotTheFolders* out) {
  if (a_folder.empty() || b_folder.empty()) return false;
  auto names = [&c](const NvrtcOutput& o, std::set<std::string>* served) {
    std::set<std::string> all;
    for (const std::string& p : without_nvrtc_own(o.probes, c)) all.insert(p);
    for (const ServedFile& f : o.served) {
      all.insert(f.path);
      served->insert(f.path);
    }
    return all;
  };
  std::set<std::string> served_a, served_b;
  const std::set<std::string> all_a = names(a, &served_a), raw_b = names(b, &served_b);
  std::set<std::string> in_b;  // the second's names, its folder written as the first's
  for (const std::string& p : raw_b) {
    in_b.insert(beneath(p, b_folder) ? a_folder + p.substr(b_folder.size()) : p);
  }
  // The folder itself: NVRTC looks at the one that exists nowhere (the
  // second's) but not at the working folder (the first's, where the program
  // is in it); whether it exists changed nothing where the answers are one.
  in_b.erase(a_folder);
  std::set<std::string> in_a = all_a;
  in_a.erase(a_folder);
  for (const std::string& p : in_a) {
    if (!beneath(p, a_folder) || !raw_b.count(p)) continue;
    const bool also_by_folder = raw_b.count(b_folder + p.substr(a_folder.size())) > 0;
    (also_by_folder ? out->both : out->absolute).insert(p);
  }
  // A file found in the folder by the folder's name is the folder's.
  bool found_there = false;
  for (const std::string& f : served_a) {
    if (beneath(f, a_folder) && !out->absolute.count(f)) found_there = true;
  }
  for (const std::string& f : served_b) found_there = found_there || beneath(f, b_folder);
  if (in_a != in_b && env::read(env::Var::kcache_debug_name_check)) {
    for (const std::string& p : in_a) {
      if (!in_b.count(p))
        std::fprintf(stderr, "name check: only %s named %s\n", a_folder.c_str(), p.c_str());
    }
    for (const std::string& p : in_b) {
      if (!in_a.count(p))
        std::fprintf(stderr, "name check: only %s named %s\n", b_folder.c_str(), p.c_str());
    }
  }
  return in_a == in_b && !found_there;
}

// Whether the program may reach its own name where the check's one other
// name cannot show it: the check compares two answers, which catches every
// name that reaches the output as text or changes its length, but not a
// compile-time test over the name's characters that happens to agree for
// the other name (a review's wrong hit: has_x(__BASE_FILE__)). Such a test
// needs a file-name builtin expanded in the program's own text, which
// may_share_across_names (program.cc) looks for there, unless it is pasted
// together (`##` in the source) or comes from a header: __BASE_FILE__ names
// the program anywhere. A header NVRTC read that changed since counts as
// one that names it. What is left (a header's macro holding __FILE__, or a
// __builtin_FILE() default argument, used in such a test in the source) is
// in docs/KEYS.md, "Residual limits": CCCL's headers, CuPy's copy of them
// among the user's, hold both, so refusing them would share no CuPy kernel.
bool may_name_itself_unseen(const std::string& source, const NvrtcOutput& out) {
  if (source.find("##") != std::string::npos) return true;
  // By the bytes served (a CUB program reads ~500 headers, the same ones
  // every time; the drop-in's forks take every lock it has).
  thread_local std::map<Hash128, bool> names_base_file;
  for (const ServedFile& f : out.served) {
    auto known = names_base_file.find(f.content);
    if (known != names_base_file.end()) {
      if (known->second) return true;
      continue;
    }
    std::optional<std::string> bytes;
    try {
      bytes = read_input_file(f.path);
    } catch (const Error&) {
      return true;
    }
    if (!bytes || xxh3_128(*bytes) != f.content) return true;
    const bool names = bytes->find("__BASE_FILE__") != std::string::npos;
    if (names_base_file.size() < 100000) names_base_file.emplace(f.content, names);
    if (names) return true;
  }
  return false;
}

}  // namespace

namespace parts {

// `request` for every program name in any folder (CompileOptions::
// name_free): the name as `shared_name` says (its file name only), and a
// pass name no named request carries, so the two never share a key.
cache::CompileRequest any_name_request(cache::CompileRequest request,
                                       const std::string& shared_name) {
  request.source_name = shared_name;
  request.image_pass += "; any program folder";
  return request;
}

// The absolute folder a program's quoted includes are searched in.
std::string program_folder(const CompileOptions& options) {
  std::string folder = parts::folder_of(options.source_path);
  if (!folder.empty() && folder.front() == '/') return folder;
  std::string cwd = compile_folder(options.working_folder);
  if (cwd.empty()) return "";
  return folder.empty() ? cwd : cwd + "/" + folder;
}

// The absolute folder a program named `name` is searched in.
std::string program_folder_of(const std::string& name) {
  CompileOptions o;
  o.source_path = name;
  return parts::program_folder(o);
}

}  // namespace parts

// One answer for every folder? Compiled again in another folder from the
// same final input: only answers that agree (program.h) are.
void Compiler::check_name(const CompileOptions& options, Miss* m,
                          std::unique_lock<std::mutex>* here, std::future<NvrtcOutput>* early) {
  if (!options.name_free || !m->output->program || !m->output->sealed ||
      !m->classified.unkeyable.empty()) {
    return;
  }
  // A file NVRTC found in the program's folder (read, or only looked at)
  // ties the answer to that folder.
  const std::string folder = parts::program_folder(options);
  for (const cache::ManifestProbe& p : m->classified.keyed) {
    if (p.present && (p.path == folder || p.path.rfind(folder + "/", 0) == 0)) return;
  }
  if (may_name_itself_unseen(options.source_text.value_or(""), *m->output)) return;
  NvrtcInput other = m->input;
  other.source_name = options.name_check;
  try {
    std::optional<NvrtcOutput> checked;
    if (early) {
      checked = early->get();  // compiled alongside the miss
    } else if (pool_) {
      checked = pool_->compile(toolkit_.nvrtc.path, other);
    } else {
      if (!here->owns_lock()) here->lock();
      checked = Nvrtc::open(toolkit_.nvrtc.path).compile(other);
    }
    m->name_checked = checked->program && checked->sealed &&
                      checked->lowered_names == m->output->lowered_names &&
                      options.name_check_same(*m->output->program, *checked->program) &&
                      same_paths_in_both_folders(*m->output, folder, *checked,
                                                 parts::program_folder_of(options.name_check),
                                                 probe_context_, &m->not_the_folders);
    if (!m->name_checked && checked->program && env::read(env::Var::kcache_debug_name_check)) {
      print_name_check(options.logical_name(), *m->output->program, *checked->program);
    }
  } catch (const std::exception&) {
    m->name_checked = false;  // kept under its own name
  }
}

}  // namespace kcache::compiler
