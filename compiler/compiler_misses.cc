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

std::string join(const std::vector<std::string>& items, const std::string& sep) {
  std::string out;
  for (const std::string& s : items) out += (out.empty() ? "" : sep) + s;
  return out;
}

std::string describe_supported(const std::vector<int>& archs) {
  std::vector<std::string> names;
  for (int a : archs) names.push_back("sm_" + std::to_string(a));
  return join(names, ", ");
}

// Compile targets and a free slot; released on every path.
class SlotGuard {
 public:
  template <typename S>
  explicit SlotGuard(S& s) : release_([&s] { s.release(); }) {
    s.acquire();
  }
  ~SlotGuard() { release_(); }

 private:
  std::function<void()> release_;
};

}  // namespace

void Compiler::compile_misses(const CompileOptions& options, Prepared& prepared, bool recorded,
                              CompileResult* result) {
  std::vector<Miss> misses;
  for (size_t i = 0; i < result->targets.size(); ++i) {
    if (result->targets[i].hit) continue;
    misses.emplace_back();
    misses.back().index = i;
    misses.back().target = result->targets[i].target;
  }
  if (misses.empty()) return;
  if (prepared.recipe.checks_archs) check_archs(misses);
  const std::vector<size_t> compiled = run_compiles(options, prepared, &misses);
  count_compiles(misses, compiled);
  throw_first_error(options, prepared, misses);
  store_misses(options, prepared, misses, result);
  if (std::any_of(misses.begin(), misses.end(), [](const Miss& m) { return m.storable; })) {
    write_note(options, prepared);
  }
  // The next process finds it through a lookup record (lookup_record.h):
  // looked up once now as it would, recording what that looks at.
  if (storage_ && recorded &&
      std::any_of(misses.begin(), misses.end(), [](const Miss& m) { return m.storable; })) {
    record_after_store(options, prepared);
  }
}

// Every miss compiled, at once on threads of their own; a PTX target beside
// a cubin of its arch from that cubin's compile (ptx_from_cubins). The misses
// NVRTC compiled, by index.
std::vector<size_t> Compiler::run_compiles(const CompileOptions& options, const Prepared& prepared,
                                           std::vector<Miss>* all) {
  std::vector<Miss>& misses = *all;
  const std::vector<std::pair<size_t, size_t>> shared_ptx = ptx_from_cubins(prepared, all);
  std::vector<size_t> compiled;
  for (size_t s = 0; s < misses.size(); ++s) {
    auto answered = [s](const std::pair<size_t, size_t>& pc) { return pc.first == s; };
    if (std::none_of(shared_ptx.begin(), shared_ptx.end(), answered)) compiled.push_back(s);
  }
  std::vector<std::thread> threads;
  for (size_t s = 1; s < compiled.size(); ++s) {
    Miss* m = &misses[compiled[s]];
    threads.emplace_back([&, m] { compile_miss(options, prepared, m); });
  }
  compile_miss(options, prepared, &misses[compiled[0]]);  // one target: no thread
  for (std::thread& th : threads) th.join();
  for (const auto& [ptx, cubin] : shared_ptx) {
    if (!take_ptx(options, prepared, misses[cubin], &misses[ptx])) {
      compile_miss(options, prepared, &misses[ptx]);  // its cubin's compile failed
      compiled.push_back(ptx);
    }
  }
  return compiled;
}

// The store's counters of what NVRTC did for `compiled`.
void Compiler::count_compiles(const std::vector<Miss>& misses, const std::vector<size_t>& compiled) {
  double nvrtc_ms = 0;
  int failures = 0;
  for (size_t s : compiled) {
    const Miss& m = misses[s];
    if (m.output) nvrtc_ms += m.output->ms;
    // A program's rejected source is an answer, not a throw: it counts too.
    failures += m.error != nullptr || (m.output && m.output->program &&
                                       m.output->program->compile_result != cache::kNvrtcSuccess);
  }
  if (storage_) {
    storage_->count("nvrtc_invocations", static_cast<int64_t>(compiled.size()));
    storage_->count("nvrtc_ms", static_cast<int64_t>(nvrtc_ms + 0.5));
    if (failures) storage_->count("nvrtc_failures", failures);
  }
}

// The first failed target's error, in target order, with the hints a user
// needs (an undeclared file, an include found nowhere).
void Compiler::throw_first_error(const CompileOptions& options, const Prepared& prepared,
                                 const std::vector<Miss>& misses) const {
  for (const Miss& m : misses) {
    if (!m.error) continue;
    try {
      std::rethrow_exception(m.error);  // the first in target order
    } catch (const CompileError& e) {
      // A file NVRTC read that the action did not declare (served), or an
      // include it could not find that exists undeclared: say so
      // (undeclared.h).
      if (prepared.recipe.keys_relative_to_working_folder && options.may_read) {
        std::vector<std::string> files = undeclared_files(options.may_read, e.probes());
        if (!files.empty()) {
          throw undeclared_error(files, missing_includes(options, prepared), options.source_path,
                                 options.target_label);
        }
      }
      std::vector<MissingInclude> missing = missing_includes(options, prepared);
      if (prepared.recipe.keys_relative_to_working_folder)
        add_unopened_include(e.log(), options.include_dirs, &missing);
      throw with_undeclared_hints(e, missing, true, options.source_path, options.target_label);
    }
  }
}

// NVRTC's PTX of a compile for sm_N is its PTX for compute_N: one front end,
// one __CUDA_ARCH__, the same files read (measured: byte-identical for CUB,
// cuda_fp16, -G and -lineinfo). So a PTX target beside a cubin of its arch
// (`--arch sm_90 --ptx compute_90`, prewarm's default) is answered by that
// compile: one NVRTC run fewer. Not for a program (one target, NVRTC's every
// answer) nor with link-time optimisation (no PTX). Pairs (PTX, cubin).
std::vector<std::pair<size_t, size_t>> Compiler::ptx_from_cubins(const Prepared& p,
                                                                 std::vector<Miss>* misses) {
  std::vector<std::pair<size_t, size_t>> pairs;
  if (p.recipe.keeps_program_answers) return pairs;
  for (const std::string& o : p.key_options) {
    if (o.find("lto") != std::string::npos) return pairs;
  }
  for (size_t i = 0; i < misses->size(); ++i) {
    const Target& ptx = (*misses)[i].target;
    if (ptx.kind != cache::TargetKind::ptx || ptx.arch.compare(0, 8, "compute_") != 0) continue;
    for (size_t j = 0; j < misses->size(); ++j) {
      const Target& cubin = (*misses)[j].target;
      if (cubin.kind == cache::TargetKind::cubin && cubin.arch.compare(0, 3, "sm_") == 0 &&
          cubin.arch.substr(3) == ptx.arch.substr(8)) {
        (*misses)[j].keeps_ptx = true;
        pairs.emplace_back(i, j);
        break;
      }
    }
  }
  return pairs;
}

// `ptx` answered by `cubin`'s compile (ptx_from_cubins): its reads, keys and
// log, NVRTC's PTX as its image, made lean on its own. False where that
// compile failed (a PTX-only compile may not: ptxas never runs).
bool Compiler::take_ptx(const CompileOptions& options, const Prepared& p, const Miss& cubin,
                        Miss* ptx) const {
  if (cubin.error || !cubin.output || cubin.kept_ptx.empty()) return false;
  const size_t index = ptx->index;
  const Target target = ptx->target;
  *ptx = cubin;
  ptx->index = index;
  ptx->target = target;
  ptx->input = miss_input(options, p, target);
  ptx->keeps_ptx = false;
  ptx->kept_ptx.clear();
  ptx->lean = LeanImage{};
  ptx->output->image = cubin.kept_ptx;
  ptx->output->ptx.clear();
  if (options.lean) make_lean(p, ptx);
  return true;
}

// A target NVRTC does not support is an InvalidArgument naming what it does.
// (A program's is NVRTC's to answer, in its record.)
void Compiler::check_archs(const std::vector<Miss>& misses) const {
  for (const Miss& m : misses) {
    const Nvrtc& nvrtc = Nvrtc::open(toolkit_.nvrtc.path);
    std::vector<int> supported = nvrtc.supported_archs();
    const Target& t = m.target;
    if (!supported.empty() &&
        std::find(supported.begin(), supported.end(), t.number) == supported.end()) {
      auto [major, minor] = nvrtc.version();
      throw InvalidArgument(t.arch + " is not supported by NVRTC " + std::to_string(major) + "." +
                            std::to_string(minor) + " (" + nvrtc.path() + "); it supports " +
                            describe_supported(supported) + " (and compute_ of each)");
    }
  }
}

// NVRTC's own search on the real file system (seal.h, serving): the
// in-memory headers only, the -I as written, the working folder. A program
// gets no toolkit folder it was not given; `kcache compile` the toolkit's
// after the user's (as nvcc searches them).
NvrtcInput Compiler::miss_input(const CompileOptions& options, const Prepared& p,
                                const Target& t) const {
  NvrtcInput input;
  input.source_name = options.logical_name();
  input.source = p.source;
  for (const cache::Header& h : options.memory_headers) {
    input.headers.push_back({h.include_name, h.content});
  }
  input.name_expressions = options.name_expressions;
  input.program = options.program;
  input.want_cubin = t.kind == cache::TargetKind::cubin;
  input.want_ptx = options.lean;
  input.options.push_back("-arch=" + t.arch);
  input.options.insert(input.options.end(), p.key_options.begin(), p.key_options.end());
  for (const std::string& d : options.include_dirs) input.options.push_back("-I" + d);
  input.serve_disk = true;
  input.working_dir = p.folder;
  input.pwd = p.spelling;
  if (!p.recipe.adds_toolkit_includes) return input;
  for (const std::string& d : probe_context_.toolkit_dirs) input.options.push_back("-I" + d);
  return input;
}

void Compiler::compile_miss(const CompileOptions& options, const Prepared& p, Miss* m) {
  try {
    m->input = miss_input(options, p, m->target);
    m->input.want_ptx = m->input.want_ptx || m->keeps_ptx;
    m->date_keyed = !p.request.date.empty();
    SlotGuard guard(slots_);
    std::unique_lock<std::mutex> here(in_process_, std::defer_lock);
    // With a pool every compile runs there, so each child keeps seeing
    // the same options (the same arch), which its PCH needs.
    if (!pool_) here.try_lock();
    // A program's name check (check_name) compiles the same input under
    // another name. Its input is known now: it runs in a second child of
    // the pool at the same time, so a miss waits for one compile.
    std::future<NvrtcOutput> early_check;
    if (pool_ && options.name_free) {
      NvrtcInput other = m->input;
      other.source_name = options.name_check;
      early_check = std::async(std::launch::async, [this, other = std::move(other)] {
        return pool_->compile(toolkit_.nvrtc.path, other);
      });
    }
    const MountTableWatch mounts;  // made before NVRTC runs
    m->output = run_nvrtc(m->input, &here);
    settle_probes(mounts, m);
    if (p.recipe.keys_relative_to_working_folder && options.may_read) {
      std::vector<std::string> files = undeclared_files(options.may_read, named_paths(*m->output));
      if (!files.empty()) {
        throw undeclared_error(files, missing_includes(options, p), options.source_path,
                               options.target_label);
      }
    }
    check_name(options, m, &here, early_check.valid() ? &early_check : nullptr);
    if (here.owns_lock()) here.unlock();  // the lean step needs no NVRTC
    if (m->keeps_ptx && m->output) m->kept_ptx = m->output->ptx;
    if (options.lean) make_lean(p, m);
  } catch (const CompileError& e) {
    CompileError named(std::string(e.what()) + " for " + m->target.arch, e.log(), e.options());
    named.set_probes(e.probes(), e.started_ns());  // what NVRTC named (undeclared_files)
    m->error = std::make_exception_ptr(std::move(named));
  } catch (...) {
    m->error = std::current_exception();
  }
}

NvrtcOutput Compiler::run_nvrtc(const NvrtcInput& input, std::unique_lock<std::mutex>* here) {
  if (pool_) return pool_->compile(toolkit_.nvrtc.path, input);
  if (here->owns_lock() || worker_command_.empty()) {
    if (!here->owns_lock()) here->lock();
    const Nvrtc& nvrtc = Nvrtc::open(toolkit_.nvrtc.path);
    // A PCH's headers are keyed from its maker's reads (pch.h).
    return pch_dir_.empty() ? nvrtc.compile(input) : compile_with_pch(nvrtc, input, pch_dir_);
  }
  return compile_in_worker(worker_command_, toolkit_.nvrtc.path, input);
}

void Compiler::settle_probes(const MountTableWatch& mounts, Miss* m) {
  ProbeContext probe_context = probe_context_;
  probe_context.check_time_macros = !(storage_ && storage_->sloppy_time_macros());
  probe_context.mounts_changed = mounts.changed();
  const NvrtcOutput& out = *m->output;
  probe_context.served = true;
  probe_context.working_folder = m->input.working_dir;
  probe_context.date_keyed = m->date_keyed;
  probe_context.hidden.insert(out.hidden.begin(), out.hidden.end());
  for (const std::string& o : m->input.options) {
    if (o.compare(0, 2, "-I") == 0 && o.size() > 2) {
      probe_context.user_dirs.push_back(without_dot_parts(
          o[2] == '/' ? o.substr(2) : m->input.working_dir + "/" + o.substr(2)));
    }
  }
  ClassifiedProbes c = classify_probes(out.probes, probe_context, out.started_ns);
  add_served(out.served, probe_context, out.started_ns, &c);
  if (env::read(env::Var::kcache_debug_probes)) {
    for (const std::string& p : out.probes) std::fprintf(stderr, "probe %s\n", p.c_str());
    for (const std::string& l : probe_key_lines(c.keyed))
      std::fprintf(stderr, "keyed %s\n", l.c_str());
  }
  m->classified = std::move(c);
}

}  // namespace kcache::compiler
