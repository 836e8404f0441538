// Include resolution by kcache itself: the user headers a source reaches,
// for a program's scanner key (its in-memory headers among them) and for a
// failed compile's hints. NVRTC itself always reads the disk (served,
// compiler.h); nothing here decides what it compiles.
//
// `#include "x.h"` is looked up in the including file's folder, then in each
// -I folder; `#include <x.h>` in each -I folder; both then in the toolkit's
// include folders. A header found in a user folder is read and scanned for
// its own includes (recursively). One found only in the toolkit is left to
// NVRTC (it is keyed by what NVRTC read). One found nowhere is not an error
// by itself (it may sit in an `#ifdef` branch not taken): it is listed as
// missing, with every folder searched.
//
// Headers are named by their spelling, one namespace for the whole compile,
// as NVRTC names in-memory headers: a spelling that means two different
// files gets an alias (kAliasPrefix). Spellings carry no checkout location.
//
// `#include_next` in a user header found in -I folder i goes on in folders
// i+1.. then the toolkit's (GCC's and NVRTC's rule); the next header is
// named "kcache-include-next/<j>/<spelling>" and the directive in the
// includer's text rewritten to include that name, lines kept. Line splices
// are backslash + LF or CR LF (docs/KEYS.md, "Preprocessor semantics of
// kcache's scanner").
//
// Conditional compilation is not evaluated: every #include and __has_include
// in a user file is followed, except inside a group under a literal `#if 0` or
// `#elif 0`, which no preprocessor compiles whatever is defined. Computed
// includes (`#include MACRO`) are not seen here.
#pragma once

#include <functional>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace kcache::compiler {

// Which user files kcache may read, by the path it would read them at (as
// built from the source's path and -I, not made absolute); empty: all. Under
// Bazel's worker a request may read only its action's declared inputs, as a
// sandboxed action could: anything else is treated as absent.
using MayRead = std::function<bool(const std::string& path)>;

struct ScanOptions {
  // Trigraphs are replaced (NVRTC 13 does so with -std=c++03, c++11 and
  // c++14, not with c++17 or later): `??/` newline is a line splice, `??=` a #.
  bool trigraphs = false;
};

struct IncludeSearch {
  std::vector<std::string> user_dirs;     // -I folders, in order, as given
  std::vector<std::string> toolkit_dirs;  // <cuda>/include, <cuda>/include/cccl
  MayRead may_read;                       // user files only; the toolkit is always readable
  // Where an #include_next in the file resolved from goes on searching: the
  // index into user_dirs of the first folder (i + 1 for a header found in
  // user_dirs[i], 0 for one found next to its includer); -1 for the kernel
  // source, where #include_next is an #include (NVRTC warns so).
  int root_next_from = -1;
  ScanOptions scan = {};
  // Spellings the caller hands NVRTC in memory itself (an NVRTC program's
  // headers): never looked for on disk, never stubbed.
  std::set<std::string> in_memory = {};
};

// #include_next: a header found by one is handed to NVRTC under this prefix,
// the index of its -I folder and its spelling ("kcache-include-next/1/x.h"),
// and the directive in the includer's handed text is rewritten to include
// that name (docs/KEYS.md, "#include_next").
constexpr const char kIncludeNextPrefix[] = "kcache-include-next/";
// A user header whose spelling names another header in the same compile (the
// toolkit's, or another file's) is handed under another name: the one it is
// handed under already, its path beneath its -I folder, or, where those are
// taken, "kcache-alias/<n>/<spelling>"; its includer's directive is rewritten
// to that name. A toolkit header whose spelling names a user header is
// included as <./spelling>, which no handed header is named.
constexpr const char kAliasPrefix[] = "kcache-alias/";

struct ResolvedHeader {
  std::string name;     // the spelling, e.g. "util/math.cuh": what NVRTC matches
  std::string path;     // where it was read, e.g. "kernels/util/math.cuh"
  std::string content;  // its text (#include_next rewritten)
};

struct MissingInclude {
  std::string name;                   // the spelling
  std::string included_from;          // "kernels/saxpy.cu:3"
  std::vector<std::string> searched;  // every folder looked in, in order
  // The stub NVRTC is handed under `name`, empty where none is given (a
  // spelling also probed by __has_include must stay absent).
  std::string stub;
};

struct IncludeGraph {
  std::vector<ResolvedHeader> headers;        // user headers, sorted by name
  std::vector<std::string> toolkit_includes;  // spellings left to NVRTC, sorted
  std::vector<MissingInclude> missing;        // sorted by name
  // The text of the file resolved from as NVRTC must be handed it, where an
  // #include_next in it was rewritten (only with root_next_from >= 0).
  std::optional<std::string> root_content;
};

// A directive found by scan_includes.
struct IncludeDirective {
  std::string name;
  bool angled = false;  // <x.h> rather than "x.h"
  bool probe = false;   // __has_include(...) rather than #include
  bool next = false;    // #include_next / __has_include_next
  int line = 0;         // 1-based
  // Bytes [begin, end) of the text: from the directive's name (`include_next`
  // after the `#`) or `__has_include_next` to the header name's closing
  // delimiter; what resolve_includes rewrites for an #include_next.
  size_t begin = 0, end = 0;
};

struct ScannedFile {
  std::vector<IncludeDirective> includes;
  // The file names `#line N "name"` and `# N "name"` directives give (outside
  // dead groups), escapes undone, each once: NVRTC names the file so in its
  // complaints.
  std::vector<std::string> line_names;
};

// Every #include / #include_next / __has_include with a literal name in
// `text`, skipping comments, string literals and groups under `#if 0` /
// `#elif 0` (the literal token 0 alone: `00`, `0x0`, `(0)` or a macro are
// followed). Other conditionals are not evaluated. A line splice is a
// backslash then LF or CR LF (a CR alone ends no line, as in NVRTC). Linear in
// the text's size, any nesting depth; any input is safe
// (fuzz/include_scanner_fuzzer.cc).
std::vector<IncludeDirective> scan_includes(std::string_view text, const ScanOptions& options = {});
// The same, with the #line names.
ScannedFile scan_file(std::string_view text, const ScanOptions& options = {});

// Resolves the includes of `source` (read from `source_path`) recursively.
// Throws IoError naming a header that exists but cannot be read, and
// InvalidArgument when one spelling names two different headers.
IncludeGraph resolve_includes(const std::string& source_path, std::string_view source,
                              const IncludeSearch& search);

// NVRTC's complaint about an include it could not find: the name, who
// included it, and how (a failed compile's hints, undeclared.h).
struct AskedInclude {
  std::string name;      // as written between the quotes or brackets
  std::string includer;  // as NVRTC names it: the source's name or a header's spelling
  int line = 0;
  bool angled = false;  // <name>, as the echoed directive shows
};

// The first such complaint in an NVRTC log, or nullopt. Grammar (NVRTC 13.0;
// "could not open" is its wording where it has no -I folder at all):
//   line    := includer "(" digits "): catastrophic error: " verb
//              " open source file \"" name "\"" rest-of-line "\n" echo
//   verb    := "cannot" | "could not"
//   echo    := the directive's line as written, e.g. `  #include <x.h>`
// Linear in the log's size; any input is safe (fuzz/nvrtc_log_fuzzer.cc).
std::optional<AskedInclude> parse_cannot_open(std::string_view log);

}  // namespace kcache::compiler
