#include "compiler/program_service.h"

#include <limits.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <map>
#include <mutex>
#include <utility>

#include "cache/config.h"
#include "cache/storage.h"
#include "cache/local/store.h"
#include "common/bytes.h"
#include "common/error.h"
#include "common/file_system.h"
#include "compiler/compiler.h"
#include "compiler/nvrtc/nvrtc_pool.h"
#include "compiler/seal/seal.h"
#include "compiler/toolkit.h"

namespace kcache::compiler {
namespace {

// A program's compile and the name check's second compile (program.h).
constexpr int kNvrtcProcesses = 2;

}  // namespace

struct ProgramService::State {
  // The store's and the settings' messages, said by the host with the next
  // answer (once per host, whichever of its compile processes meets them);
  // the store may warn from flush() on another thread.
  std::mutex notices_mutex;
  std::vector<std::string> notices;
  void note(const std::string& message) {
    std::lock_guard<std::mutex> lock(notices_mutex);
    notices.push_back(message);
  }
  std::vector<std::string> take_notices() {
    std::lock_guard<std::mutex> lock(notices_mutex);
    return std::exchange(notices, {});
  }
  std::unique_ptr<cache::Storage> storage;
  // `storage` once made, for flush() on another thread.
  std::atomic<cache::Storage*> made{nullptr};
  // Where NVRTC runs, sealed: a miss's compile and its name check's at
  // once (NVRTC serializes compiles within one process).
  std::unique_ptr<NvrtcPool> pool;
  // Whether this request's "NVRTC starts" was sent (the name check's
  // compile starts NVRTC on another thread).
  std::atomic<bool> progress_sent{false};
  // One Compiler per real NVRTC the hosts name (one in practice).
  std::map<std::string, std::unique_ptr<Compiler>> compilers;
};

ProgramService::ProgramService(std::vector<std::string> worker_command)
    : worker_command_(std::move(worker_command)), state_(std::make_unique<State>()) {}

ProgramService::~ProgramService() = default;

void ProgramService::flush(bool last) {
  if (cache::Storage* storage = state_->made.load()) storage->flush();
  if (!last) return;
  // Nobody asks any more: what no answer carried goes where the store's
  // messages go without a host (stderr, unless KCACHE_QUIET).
  for (const std::string& notice : state_->take_notices()) {
    if (!cache::store_quiet()) std::fprintf(stderr, "kcache: %s\n", notice.c_str());
  }
}

ProgramAnswer ProgramService::compile(const ProgramRequest& q) {
  // The host's folder, for this request: NVRTC, the lookup and its records
  // take relative names from the working folder of the process they run in.
  if (q.working_dir.empty() || q.working_dir.front() != '/') {
    throw IoError("the program's working folder has no name (deleted?): \"" + q.working_dir + "\"");
  }
  if (::chdir(q.working_dir.c_str()) != 0) {
    throw IoError(errno_message("kcache's compile process cannot enter the program's working folder",
                                q.working_dir, errno));
  }
  // And the host's $PWD, as it chdirs: the key (working_folder_spelling)
  // and NVRTC (through NvrtcInput::pwd) take the spelling from it. This
  // process answers one request at a time, so no other thread reads it.
  if (q.pwd.empty()) {
    ::unsetenv("PWD");
  } else {
    ::setenv("PWD", q.pwd.c_str(), 1);
  }
  State& s = *state_;
  if (!s.storage) {
    cache::StorageOptions options = cache::storage_options_or_local_only(
        [&s](const std::string& w) { s.note("cache settings: " + w); });
    options.warn = [&s](const std::string& w) { s.note("warning: " + w); };
    s.storage = std::make_unique<cache::Storage>(std::move(options));
    s.made = s.storage.get();
  }
  std::unique_ptr<Compiler>& compiler = s.compilers[q.nvrtc_path];
  if (!compiler) {
    Toolkit toolkit = find_toolkit("");
    char real[PATH_MAX], toolkit_real[PATH_MAX];
    std::string a = ::realpath(q.nvrtc_path.c_str(), real) ? real : q.nvrtc_path;
    std::string b = ::realpath(toolkit.nvrtc.path.c_str(), toolkit_real) ? toolkit_real
                                                                         : toolkit.nvrtc.path;
    if (a != b) toolkit.nvrtc = fingerprint_library(q.nvrtc_path);
    if (!s.pool) {
      s.pool = std::make_unique<NvrtcPool>(worker_command_, "", kNvrtcProcesses);
      s.pool->on_compile([this] {
        if (progress_ && !state_->progress_sent.exchange(true)) progress_(encode_program_progress());
      });
    }
    compiler = std::make_unique<Compiler>(std::move(toolkit), s.storage.get());
    compiler->use_pool(s.pool.get());
  }
  ProgramOptions mapped = program_options(q.program, q.options);
  if (!mapped.unsupported.empty()) throw InvalidArgument(mapped.unsupported);
  mapped.options.lean = q.lean;
  ProgramAnswer out;
  out.result = compile_program(*compiler, mapped.options);
  return out;
}

std::string ProgramService::answer(std::string_view request) {
  ProgramAnswer a;
  state_->progress_sent = false;
  try {
    a = compile(decode_program_request(request));
  } catch (const std::exception& e) {
    a.result.reset();
    a.error = e.what();
  }
  a.notices = state_->take_notices();
  // The compile processes it starts run as it does (the same filters and
  // kernel): its answer is theirs.
  std::string why;
  if (!seal_available(&why)) a.unsealed = "NVRTC could not be sealed: " + why;
  return encode_program_answer(a);
}

}  // namespace kcache::compiler
