#include "common/error.h"

namespace kcache {

const char* to_string(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::io:
      return "I/O error";
    case ErrorKind::corrupt:
      return "corrupt data";
    case ErrorKind::incompatible_version:
      return "incompatible version";
    case ErrorKind::compile_failed:
      return "compile failed";
    case ErrorKind::driver:
      return "CUDA driver error";
    case ErrorKind::invalid_argument:
      return "invalid argument";
    case ErrorKind::not_found:
      return "not found";
  }
  return "error";
}

}  // namespace kcache
