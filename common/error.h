// The one family of errors kcache throws.
//
// Every failure a user can cause or meet is one of these kinds, so callers can
// react to the kind (a corrupt entry is a miss, a driver error names its
// CUresult) and every message says what failed, on what, and what to do.
#pragma once

#include "common/cxx17.h"  // first: says so in one line below C++17

#include <stdexcept>
#include <cstdint>
#include <string>
#include <vector>

namespace kcache {

enum class ErrorKind {
  io,                    // a file or network operation failed (errno or HTTP status in the text)
  corrupt,               // stored bytes failed a magic, size or checksum check
  incompatible_version,  // a store or bundle written by a newer, incompatible kcache
  compile_failed,        // NVRTC rejected the source (see CompileError::log())
  driver,                // a CUDA driver call failed or no driver is present
  invalid_argument,      // the caller asked for something that cannot be done as asked
  not_found,             // a named thing (key, kernel, file, arch) does not exist
};

const char* to_string(ErrorKind kind);

class Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, const std::string& message) : std::runtime_error(message), kind_(kind) {}
  ErrorKind kind() const noexcept { return kind_; }

 private:
  ErrorKind kind_;
};

class IoError : public Error {
 public:
  explicit IoError(const std::string& message) : Error(ErrorKind::io, message) {}
};

class CorruptError : public Error {
 public:
  explicit CorruptError(const std::string& message) : Error(ErrorKind::corrupt, message) {}
};

class IncompatibleVersionError : public Error {
 public:
  explicit IncompatibleVersionError(const std::string& message)
      : Error(ErrorKind::incompatible_version, message) {}
};

class InvalidArgument : public Error {
 public:
  explicit InvalidArgument(const std::string& message)
      : Error(ErrorKind::invalid_argument, message) {}
};

class NotFound : public Error {
 public:
  explicit NotFound(const std::string& message) : Error(ErrorKind::not_found, message) {}
};

// NVRTC's log and the options it was given are kept apart from the message, so
// a tool can print the log exactly as NVRTC wrote it (file:line: ...).
class CompileError : public Error {
 public:
  CompileError(const std::string& message, std::string log, std::vector<std::string> options)
      : Error(ErrorKind::compile_failed, message),
        log_(std::move(log)),
        options_(std::move(options)) {}
  const std::string& log() const noexcept { return log_; }
  const std::vector<std::string>& options() const noexcept { return options_; }
  // The paths a sealed compile named before it failed (compiler/seal/seal.h), and
  // when it started (CLOCK_REALTIME ns): a failed round's search is keyed too.
  const std::vector<std::string>& probes() const noexcept { return probes_; }
  int64_t started_ns() const noexcept { return started_ns_; }
  void set_probes(std::vector<std::string> probes, int64_t started_ns) {
    probes_ = std::move(probes);
    started_ns_ = started_ns;
  }

 private:
  std::string log_;
  std::vector<std::string> options_;
  std::vector<std::string> probes_;
  int64_t started_ns_ = 0;
};

// A CUDA driver failure. `result` is the CUresult value (0 when no driver could
// be loaded at all) and `result_name` its name, e.g. "CUDA_ERROR_INVALID_VALUE".
class DriverError : public Error {
 public:
  DriverError(const std::string& message, int result, std::string result_name)
      : Error(ErrorKind::driver, message), result_(result), result_name_(std::move(result_name)) {}
  int result() const noexcept { return result_; }
  const std::string& result_name() const noexcept { return result_name_; }

 private:
  int result_;
  std::string result_name_;
};

}  // namespace kcache
