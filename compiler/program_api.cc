#include "compiler/program_api.h"

#include <algorithm>
#include <iterator>
#include <optional>
#include <string_view>

namespace kcache::compiler {
namespace {

bool option_starts_with(const std::string& s, const char* prefix) {
  return s.rfind(prefix, 0) == 0;
}

// The value of `option` if it is `name=value` (NVRTC's spelling of options
// with a value).
std::optional<std::string> value_of(const std::string& option, const char* name) {
  std::string n = std::string(name) + "=";
  if (!option_starts_with(option, n.c_str())) return std::nullopt;
  return option.substr(n.size());
}

// Options whose effect kcache cannot key: they read or write files outside
// the compile's inputs, or their output embeds this machine's paths.
struct Refused {
  const char* prefix;
  const char* why;
};
constexpr Refused kRefused[] = {
    {"-include", "it includes a file kcache does not hand"},
    {"--pre-include", "it includes a file kcache does not hand"},
    {"-pch", "precompiled headers are files kcache does not key"},
    {"--pch", "precompiled headers are files kcache does not key"},
    {"-create-pch", "precompiled headers are files kcache does not key"},
    {"--create-pch", "precompiled headers are files kcache does not key"},
    {"-use-pch", "precompiled headers are files kcache does not key"},
    {"--use-pch", "precompiled headers are files kcache does not key"},
    {"-time", "it writes a file"},
    {"--time", "it writes a file"},
    {"-fdevice-time-trace", "it writes a file"},
    {"--fdevice-time-trace", "it writes a file"},
    {"-dlto", "its LTO-IR embeds the working directory"},
    {"--dlto", "its LTO-IR embeds the working directory"},
    {"--dlink-time-opt", "its LTO-IR embeds the working directory"},  // -dlto's long name
    {"-dlink-time-opt", "its LTO-IR embeds the working directory"},
    {"-gen-lto", "its LTO-IR embeds the working directory"},
    {"--gen-lto", "its LTO-IR embeds the working directory"},
    {"-optix-ir", "its OptiX-IR is not compiled through the cache"},
    {"--optix-ir", "its OptiX-IR is not compiled through the cache"},
};

// NVRTC 13 options that, written alone, take the next argument as their
// value, whatever it holds (`--ptxas-options -DX` hands "-DX" to ptxas), and
// options measured to take none: each followed by "-DX_MARK", which NVRTC
// then failed on, or defined (docs/NVRTC_SHIM.md, "Options").
constexpr std::string_view kTakesNextArgument[] = {
    "-dopt", "--dopt", "-rdc", "--relocatable-device-code", "-Xptxas", "--ptxas-options",
    "-maxrregcount", "--maxrregcount", "-ftz", "--ftz", "-prec-div", "--prec-div", "-prec-sqrt",
    "--prec-sqrt", "-fmad", "--fmad", "-split-compile", "--split-compile", "-modify-stack-limit",
    "--modify-stack-limit", "-Ofc", "--Ofast-compile", "-builtin-move-forward",
    "--builtin-move-forward", "-builtin-initializer-list", "--builtin-initializer-list", "-jtd",
    "--jump-table-density", "-device-stack-protector", "--device-stack-protector", "-diag-error",
    "--diag-error", "-diag-suppress", "--diag-suppress", "-diag-warn", "--diag-warn",
    "-brief-diag", "--brief-diagnostics"};
constexpr std::string_view kTakesNoValue[] = {
    "-G", "--device-debug", "-lineinfo", "--generate-line-info", "-dc", "--device-c", "-dw",
    "--device-w", "-ewp", "--extensible-whole-program", "-default-device",
    "--device-as-default-execution-space", "--use_fast_math", "-use_fast_math", "-w",
    "--disable-warnings", "-err-no", "--display-error-number", "-no-err-no",
    "--no-display-error-number", "-restrict", "--restrict", "-minimal", "--minimal",
    "-fdevice-syntax-only", "--fdevice-syntax-only", "-no-source-include", "--no-source-include",
    "-extra-device-vectorization", "--extra-device-vectorization", "-dlto", "--dlink-time-opt",
    "-gen-opt-lto", "--gen-opt-lto", "-device-int128", "--device-int128"};

bool listed(std::string_view option, const std::string_view* list, size_t n) {
  return std::find(list, list + n, option) != list + n;
}

// The options program_options maps itself, each with a value.
enum class Valued { arch, include, define, undefine };

// One of those, as written: its value, or `alone` where the option stands
// by itself and its value is the next argument.
struct ValuedOption {
  Valued kind;
  std::string value;
  bool alone = false;
};

std::optional<ValuedOption> valued_option(const std::string& option) {
  struct Spelling {
    const char* name;
    Valued kind;
    bool glued;  // short: the value may follow without '=' (-DX, -I/dir)
  };
  constexpr Spelling kSpellings[] = {
      {"--gpu-architecture", Valued::arch, false},   {"-arch", Valued::arch, false},
      {"--include-path", Valued::include, false},    {"-I", Valued::include, true},
      {"--define-macro", Valued::define, false},     {"-D", Valued::define, true},
      {"--undefine-macro", Valued::undefine, false}, {"-U", Valued::undefine, true},
  };
  for (const Spelling& s : kSpellings) {
    const std::string name = s.name;
    if (option == name) return ValuedOption{s.kind, "", true};
    if (std::optional<std::string> v = value_of(option, s.name)) return ValuedOption{s.kind, *v};
    if (s.glued && option_starts_with(option, s.name)) {
      return ValuedOption{s.kind, option.substr(name.size())};
    }
  }
  return std::nullopt;
}

// Whether program_options maps `option` itself (moving it out of the
// program's order): -arch, -I, -D, -U, -std in any spelling.
bool maps_itself(const std::string& option) {
  return valued_option(option) || option == "-std" || option == "--std" ||
         value_of(option, "-std") || value_of(option, "--std");
}

}  // namespace

MappedProgramOptions map_program_options(const std::vector<std::string>& nvrtc_options) {
  MappedProgramOptions out;
  MappedProgramOptions& o = out;
  auto refuse = [&](const std::string& option, const std::string& why) {
    out.unsupported = "option " + option + ": " + why;
    return out;
  };
  std::string arch;
  bool have_std = false;
  for (size_t i = 0; i < nvrtc_options.size(); ++i) {
    const std::string& option = nvrtc_options[i];
    for (const Refused& r : kRefused) {
      std::string p = r.prefix;
      if (option == p || option_starts_with(option, (p + "=").c_str()) ||
          option_starts_with(option, (p + "-").c_str())) {  // --pch-dir=, --pch-messages=, ...
        return refuse(option, r.why);
      }
    }
    // The options kcache maps take their value as NVRTC 13's parser does
    // (measured, docs/NVRTC_SHIM.md): `-D X`, `-DX`, `-D=X` and
    // `--define-macro X`, `--define-macro=X` are one option; alone, the
    // next argument is the value whatever it holds (`-D -UX` defines "-UX").
    std::optional<ValuedOption> valued = valued_option(option);
    if (!valued) {
      std::optional<std::string> std_value = value_of(option, "-std");
      if (!std_value) std_value = value_of(option, "--std");
      if (std_value) {
        if (have_std) return refuse(option, "a second -std (NVRTC warns about it)");
        have_std = true;
        o.std = *std_value;
      } else if (option == "-std" || option == "--std") {
        return refuse(option, "NVRTC 13 takes no separate value for it (it fails the compile)");
      } else if (listed(option, kTakesNextArgument, std::size(kTakesNextArgument))) {
        // With its value, as written and in order: never mapped itself.
        o.nvrtc_options.push_back(option);
        if (i + 1 < nvrtc_options.size()) o.nvrtc_options.push_back(nvrtc_options[++i]);
      } else {
        // An option kcache does not know, followed by one it maps: whether
        // NVRTC takes that as its value is not kcache's to guess.
        if (option.find('=') == std::string::npos &&
            !listed(option, kTakesNoValue, std::size(kTakesNoValue)) &&
            i + 1 < nvrtc_options.size() && maps_itself(nvrtc_options[i + 1])) {
          return refuse(option + " " + nvrtc_options[i + 1],
                        "kcache cannot tell whether NVRTC takes the second as the first's value");
        }
        o.nvrtc_options.push_back(option);  // keyed and passed as written, in order
      }
      continue;
    }
    std::string written = option;
    if (valued->alone) {
      if (i + 1 == nvrtc_options.size()) return refuse(option, "no value follows it");
      valued->value = nvrtc_options[++i];
      written += " " + valued->value;
    }
    const std::string& value = valued->value;
    // Values kcache cannot spell back exactly as NVRTC read them (empty,
    // another '=', leading blanks NVRTC skips): the real NVRTC answers.
    if (value.empty() || value.front() == '=' || value.front() == ' ' || value.front() == '\t') {
      return refuse(written, "a value kcache does not map exactly");
    }
    switch (valued->kind) {
      case Valued::arch:
        if (!arch.empty()) return refuse(written, "a second target (kcache keys one per program)");
        arch = value;
        break;
      case Valued::include:
        o.include_dirs.push_back(value);
        break;
      case Valued::define:
        o.macros.push_back("-D" + value);
        break;
      case Valued::undefine:
        if (value.find('=') != std::string::npos) {
          return refuse(written, "an undefine with a value");
        }
        o.macros.push_back("-U" + value);
        break;
    }
  }
  if (arch.empty()) return refuse("(no -arch)", "NVRTC's default target is not kcache's to guess");
  if (option_starts_with(arch, "sm_")) {
    o.archs.push_back(arch);
  } else if (option_starts_with(arch, "compute_")) {
    o.ptx_arch = arch;
  } else {
    return refuse("-arch=" + arch, "not an architecture kcache knows");
  }
  return out;
}

}  // namespace kcache::compiler
