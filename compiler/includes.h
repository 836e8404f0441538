// Include resolution by kcache itself, so the cache key hashes exactly the user
// headers NVRTC compiles.
//
// `#include "x.h"` is looked up in the including file's folder, then in each
// -I folder; `#include <x.h>` in each -I folder; both then in the toolkit's
// include folders. A header found in a user folder is read, scanned for its
// own includes (recursively) and handed to NVRTC in memory. One found only in
// the toolkit is left to NVRTC (it is keyed by the toolkit version). One found
// nowhere is not an error by itself (it may sit in an `#ifdef` branch not
// taken): it gets a stub header whose #error names it and every folder searched, so NVRTC fails
// with that message if, and only if, the include is live, and never looks for
// it on disk by itself.
//
// NVRTC matches in-memory headers by the include's spelling, exactly (measured
// with NVRTC 13.0: a header named "a/x.h" that includes "b.h" is served the
// in-memory header named "b.h", not "a/b.h"). So headers are named by their
// spelling, one namespace for the whole compile: the same spelling that means
// two different files in two places is an error that says so. Spellings carry
// no checkout location, so keys do not depend on where the sources live.
//
// `#include_next` in a user header found in -I folder i goes on in folders
// i+1.. then the toolkit's (GCC's and NVRTC's rule); the next header is
// handed as "kcache-include-next/<j>/<spelling>" and the directive in the
// includer's handed text rewritten to include that name, lines kept. `#line`
// names are recorded so an asked include's includer can be found by them.
// Line splices are backslash + LF or CR LF (docs/KEYS.md, "Preprocessor
// semantics").
//
// Conditional compilation is not evaluated: every #include and __has_include
// in a user file is followed, except inside a group under a literal `#if 0` or
// `#elif 0`, which no preprocessor compiles whatever is defined (exact; why
// `#ifdef` branches stay followed: docs/KEYS.md). Computed includes (`#include MACRO`) are not
// seen here: NVRTC is sealed (nvrtc.h), so it fails naming them and the
// compiler resolves them on demand (compiler.h, docs/KEYS.md).
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
  // NVRTC's name for the file resolved from (the program name it is given);
  // empty: its path. Where NVRTC names the headers it finds (disk_name).
  std::string root_name = {};
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
  std::string content;  // its text (#include_next rewritten); NVRTC gets handed_text()
  std::vector<std::string> line_names = {};  // its #line file names (ScannedFile)
  // The name NVRTC gives it on disk (disk_name_next_to, disk_name_in) where it
  // was first found; empty: its spelling.
  std::string disk_name = {};
};

// The name NVRTC gives a header it reads from disk (its __FILE__ and the name
// in its diagnostics), measured with NVRTC 13.0: found next to its includer,
// the includer's name up to its last '/' then the spelling ("inc/sub/w.h"
// including "../up.h": "inc/sub/../up.h"); found in -I folder D, D then the
// spelling, with a '/' between unless D ends with one ("-I./inc": "./inc/x.h",
// "-Iinc//": "inc//x.h"); an absolute spelling as it is.
std::string disk_name_next_to(const std::string& includer_name, const std::string& spelling);
std::string disk_name_in(const std::string& folder, const std::string& spelling);

// The text NVRTC is handed for `h`: its content, named by a `#line 1` with the
// name NVRTC would give the file on disk (ResolvedHeader::disk_name) where that
// is not its spelling, so __FILE__, __LINE__ and NVRTC's diagnostics are what
// NVRTC reading the file itself gives (issue 27). A `#line` names the file
// only; the folder of a quoted include stays the spelling's (measured). An
// absolute name keeps the spelling: keys stay free of the checkout's folder.
std::string handed_text(const ResolvedHeader& h);
// The name NVRTC gives `h` in its complaints and __FILE__: its #line name
// where handed_text gives one, else its spelling.
std::string nvrtc_name(const ResolvedHeader& h);

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
  std::vector<std::string> root_line_names;   // the #line names of the file resolved from
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
  // complaints, so an asked include's includer may be one of these.
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

// NVRTC's complaint about an include it was not handed and could not find
// (sealed, it finds none of the user's files): the name, who included it,
// and how.
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
