// nvJitLink, opened with dlopen like NVRTC (nvrtc.h): one table of function
// pointers, filled once per library path, and an error that names the missing
// library or symbol. kcache links no nvJitLink, so a cache hit never loads it.
// Used to assemble lean PTX into a cubin (lean_image.h).
//
// Thread safety: NvJitLink::open() and every method may be called from any
// number of threads at once (each call uses its own nvJitLink handle).
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace kcache::compiler {

class NvJitLink {
 public:
  // Loads the library at `path` once per process. Throws NotFound naming the
  // library and dlerror() if it cannot be loaded, or the missing symbol.
  static const NvJitLink& open(const std::string& path);

  const std::string& path() const { return path_; }
  std::pair<unsigned, unsigned> version() const;

  // Assembles one PTX module into a cubin, e.g. options {"-arch=sm_90"}.
  // Throws Error (compile_failed) with nvJitLink's error log when it fails.
  std::string ptx_to_cubin(const std::string& ptx, const std::vector<std::string>& options) const;

  struct Api;  // the function table, defined in nvjitlink.cc

 private:
  explicit NvJitLink(std::string path);
  std::string path_;
  const Api* api_;
};

}  // namespace kcache::compiler
