// Paths built from data (a bundle's arch, an archive's entry, a key) rather
// than typed by the user. The one place that turns such data into a path:
// every part is checked to be a single plain name, so the result can never
// leave the folder it is joined to.
//
// A plain name ("sm_90.cubin", "ab", "<32 hex>.<16 hex>") is 1 to 255 bytes,
// not "." or "..", without "/", NUL or any control character.
#pragma once

#include "common/cxx17.h"  // first: says so in one line below C++17

#include <string>
#include <string_view>

namespace kcache {

// True if `name` is a plain name as defined above.
bool is_plain_name(std::string_view name);

// `dir` + "/" + `name`. Throws InvalidArgument naming `what` (e.g. "bundle
// image file name") and the offending name, escaped, unless `name` is a plain
// name. `dir` is the caller's (the user's) folder and is not checked.
std::string join_plain_name(const std::string& dir, std::string_view name, const std::string& what);

// Index of the first control character (a byte below 0x20, or 0x7f) in `text`,
// or npos. Text with one can rewrite a terminal or forge a log line.
size_t find_control_character(std::string_view text);

// `text` for an error message: control characters, quotes and bytes >= 0x80
// as \xNN, at most `max` bytes of it then "...".
std::string escape_for_message(std::string_view text, size_t max = 80);

}  // namespace kcache
