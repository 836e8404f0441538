// The grpc:// remote's headers file (remote_headers_file): gRPC metadata
// sent with every call, e.g. BuildBuddy's API key. A file rather than a
// setting because the values are usually secrets.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace kcache::cache {

// At most this many headers (a file is bounded, whatever it holds).
constexpr size_t kMaxRemoteHeaders = 64;

// Parses the file's text. Grammar:
//   file   ::= (line ("\n" | end))*
//   line   ::= ws* (blank | "#" any* | name ws* ":" ws* value) ws*
//   name   ::= [A-Za-z0-9._-]+ not starting with "grpc-" (reserved), lowercased
//              (gRPC metadata keys are lowercase)
//   value  ::= printable ASCII (0x20..0x7e), not empty
// Returns (name, value) pairs in file order. Throws InvalidArgument naming
// `path` and the line for anything else, or more than kMaxRemoteHeaders.
std::vector<std::pair<std::string, std::string>> parse_remote_headers(const std::string& text,
                                                                      const std::string& path);

}  // namespace kcache::cache
