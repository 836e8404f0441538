#include "compiler/program.h"

#include "common/error.h"

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
    {"-gen-lto", "its LTO-IR embeds the working directory"},
    {"--gen-lto", "its LTO-IR embeds the working directory"},
    {"-lineinfo", "its line table names the working directory"},
    {"--generate-line-info", "its line table names the working directory"},
    {"-G", "its debug information names the working directory"},
    {"--device-debug", "its debug information names the working directory"},
    {"-optix-ir", "its OptiX-IR is not compiled through the cache"},
    {"--optix-ir", "its OptiX-IR is not compiled through the cache"},
};

}  // namespace

ProgramOptions program_options(const ProgramSource& program,
                               const std::vector<std::string>& nvrtc_options) {
  ProgramOptions out;
  CompileOptions& o = out.options;
  o.program = true;
  o.lean = false;  // a program may look up any variable by its own names
  o.source_text = program.source;
  o.source_name = program.name.empty() ? kDefaultProgramName : program.name;
  // NVRTC searches a quoted include next to the program's name, relative to
  // the working directory: so does kcache (the text is not read from there).
  o.source_path = o.source_name;
  o.memory_headers = program.headers;
  o.name_expressions = program.name_expressions;
  auto refuse = [&](const std::string& option, const std::string& why) {
    out.unsupported = "option " + option + ": " + why;
    return out;
  };
  std::string arch;
  for (const std::string& option : nvrtc_options) {
    for (const Refused& r : kRefused) {
      std::string p = r.prefix;
      if (option == p || option_starts_with(option, (p + "=").c_str()) ||
          option_starts_with(option, (p + "-").c_str())) {  // --pch-dir=, --pch-messages=, ...
        return refuse(option, r.why);
      }
    }
    std::optional<std::string> v;
    if ((v = value_of(option, "-arch")) || (v = value_of(option, "--gpu-architecture"))) {
      if (!arch.empty()) return refuse(option, "a second target (kcache keys one per program)");
      arch = *v;
    } else if (option == "-arch" || option == "--gpu-architecture" || option == "-I" ||
               option == "--include-path" || option == "-D" || option == "--define-macro" ||
               option == "-std" || option == "--std") {
      return refuse(option, "its value as a separate option is not NVRTC's spelling");
    } else if ((v = value_of(option, "--include-path"))) {
      o.include_dirs.push_back(*v);
    } else if (option_starts_with(option, "-I")) {
      o.include_dirs.push_back(option.substr(2));
    } else if ((v = value_of(option, "--define-macro"))) {
      o.defines.push_back(*v);
    } else if (option_starts_with(option, "-D")) {
      o.defines.push_back(option.substr(2));
    } else if ((v = value_of(option, "-std")) || (v = value_of(option, "--std"))) {
      o.std = *v;
    } else {
      o.nvrtc_options.push_back(option);  // keyed and passed as written
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
  for (const std::string& d : o.defines) {
    if (d.empty() || d.front() == '=') return refuse("-D" + d, "no macro name");
  }
  return out;
}

ProgramResult compile_program(Compiler& compiler, const CompileOptions& options) {
  CompileResult compiled = compiler.compile(options);
  const TargetResult& target = compiled.targets.at(0);
  ProgramResult out;
  out.record = cache::ProgramRecord::decode(target.entry->payload(),
                                            "program record of " + target.key.hex());
  out.lowered_names = target.entry->lowered_names();
  out.hit = target.hit;
  out.key = target.key;
  out.not_stored = target.not_stored;
  out.compile_ms = target.compile_ms;
  if (!out.hit && !out.not_stored.empty() && out.record.compile_result != cache::kNvrtcSuccess) {
    throw Error(ErrorKind::compile_failed, "a failed compile that was not stored (" +
                                               out.not_stored + "): the real NVRTC answers it");
  }
  return out;
}

}  // namespace kcache::compiler
