#include "cache/format/key.h"

#include "common/bytes.h"

namespace kcache::cache {
namespace {

// Every field is written as label + length-prefixed value, so no two different
// requests serialize to the same bytes (no ambiguity between "ab"+"c" and
// "a"+"bc", none between fields).
void field(ByteWriter& w, std::string_view label, std::string_view value) {
  w.str(label);
  w.str(value);
}

void list(ByteWriter& w, std::string_view label, const std::vector<std::string>& values) {
  w.str(label);
  w.u32(static_cast<uint32_t>(values.size()));
  for (const std::string& v : values) w.str(v);
}

}  // namespace

const char* to_string(TargetKind kind) {
  switch (kind) {
    case TargetKind::ptx:
      return "ptx";
    case TargetKind::cubin:
      return "cubin";
  }
  return "unknown";
}

std::string serialize_for_key(const CompileRequest& request) {
  ByteWriter w;
  field(w, "kcache-key-schema", std::to_string(kKeySchemaVersion));
  field(w, "compiler", request.compiler_identity);
  field(w, "target", to_string(request.target));
  field(w, "arch", request.arch);
  list(w, "options", request.options);
  field(w, "source-name", request.source_name);
  // Sources and headers are hashed first so the serialization stays small.
  field(w, "source-xxh3-128", xxh3_128(request.source).hex());
  w.str("headers");
  w.u32(static_cast<uint32_t>(request.headers.size()));
  for (const Header& h : request.headers) {
    w.str(h.include_name);
    w.str(xxh3_128(h.content).hex());
  }
  list(w, "name-expressions", request.name_expressions);
  if (!request.image_pass.empty()) field(w, "image-pass", request.image_pass);
  if (!request.asked_includes.empty()) list(w, "asked-includes", request.asked_includes);
  if (!request.probes.empty()) list(w, "probes", request.probes);
  if (!request.date.empty()) field(w, "date", request.date);
  if (request.sloppy_time_macros) field(w, "sloppiness", "time_macros");
  return w.take();
}

Hash128 compute_key(const CompileRequest& request) { return xxh3_128(serialize_for_key(request)); }

}  // namespace kcache::cache
