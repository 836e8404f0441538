// An NVRTC program's whole compile through the cache (program.h), answered
// in kcache's own compile process for the drop-in libnvrtc in someone else's
// program (nvrtc_shim/).
//
// Why a process of kcache's: the store (SQLite's index and WAL, the blobs, a
// remote) holds descriptors, locks and an exit-time flush. In the host they
// are the host's to close, replace or inherit: a host that closes every
// descriptor above 2 and opens its own files had SQLite's WAL frames written
// into them at exit, and one that closed them waited on SQLite's busy loop.
// So the host keeps only its pipe and socket to the compile processes it
// already starts for misses (`kcache __nvrtc-worker --loop`, NvrtcPool: not
// its children, adopted by init), and each of those answers the whole
// compile: lookup, hit, sealed compile, store. A dedicated server shared by
// hosts would need a rendezvous (a socket path), its own lifetime and an
// identity check of who asks; the pool's processes have all three already:
// one host each, ended when its end closes, started by posix_spawn from the
// host's own environment.
//
// What only the host knows travels in the request: the program (source,
// name, headers, name expressions), its options as given, the lean choice,
// the real NVRTC's path and the host's working folder, which the process
// makes its own for the request (a relative -I, a relative program name and
// the lookup records' stats are taken from it). The host's environment is
// the process's: NvrtcPool starts a new one when the host's has changed.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "compiler/program.h"
#include "compiler/program_protocol.h"

namespace kcache::compiler {

// The compile process's side: holds the store and a Compiler (made at the
// first request) for the life of the process. Not thread-safe: the worker
// loop answers one request at a time.
class ProgramService {
 public:
  // `worker_command`: the compile processes NVRTC runs in, sealed
  // (NvrtcPool's children of this process), so that a miss and its name
  // check compile at once.
  explicit ProgramService(std::vector<std::string> worker_command);
  ~ProgramService();

  // Answers one encoded request (never throws: errors are answers).
  std::string answer(std::string_view request);
  // Where a frame goes before the answer (encode_program_progress: a miss,
  // NVRTC starts), once per request; the worker loop's output. Set before
  // the first request.
  void on_progress(std::function<void(std::string_view frame)> send) {
    progress_ = std::move(send);
  }
  // Writes the store's buffered counters and access times; thread-safe
  // against answer() (the store's own lock). After each answer, and `last`
  // at the process's end, where the messages no answer carried are printed.
  void flush(bool last = false);

 private:
  struct State;
  ProgramAnswer compile(const ProgramRequest& request);
  std::vector<std::string> worker_command_;
  std::unique_ptr<State> state_;
  std::function<void(std::string_view)> progress_;
};

}  // namespace kcache::compiler
