// Lexical operations on path names: no file system access.
#pragma once

#include <string>
#include <string_view>

#include "common/cxx17.h"  // first: says so in one line below C++17

namespace kcache {

// The folder `path` names a file in, as POSIX dirname(3) computes it,
// without touching the disk:
//   "/a/b" -> "/a"   "/x" -> "/"   "/" -> "/"   "a/b" -> "a"
//   "x" -> "."       "" -> "."     "a/b/" -> "a"   "a//b" -> "a"
// A bare name's folder is ".", the folder it is resolved in, so the result
// is always a path that can be opened, searched or have a name joined to
// it ("" is no path: open("") fails). Trailing slashes belong to the last
// name ("a/b/" names the folder b, which lies in a), and a run of slashes
// is one separator. Callers that must tell a bare name from "./x" (the
// spelling is keyed) ask has_folder().
std::string parent_folder(std::string_view path);

// Whether `path` names a folder at all: it holds a slash ("x" does not,
// "./x", "/x" and "a/" do).
bool has_folder(std::string_view path);

}  // namespace kcache
