#include "compiler/program_protocol.h"

#include <utility>

#include "cache/format/entry.h"
#include "common/bytes.h"
#include "common/error.h"

namespace kcache::compiler {
namespace {

// Private to one kcache build (the host starts the binary beside its own
// drop-in); distinct from the NVRTC worker request's magic.
constexpr std::string_view kProgramRequestMagic = "KCPROGQ1";
constexpr std::string_view kProgramAnswerMagic = "KCPROGA1";
constexpr std::string_view kProgramProgressMagic = "KCPROGM1";

}  // namespace

bool is_program_request(std::string_view bytes) {
  return bytes.substr(0, kProgramRequestMagic.size()) == kProgramRequestMagic;
}

std::string encode_program_progress() { return std::string(kProgramProgressMagic); }

bool is_program_progress(std::string_view frame) { return frame == kProgramProgressMagic; }

std::string encode_program_request(const ProgramRequest& q) {
  ByteWriter w;
  w.bytes(kProgramRequestMagic);
  w.str(q.program.source);
  w.str(q.program.name);
  w.u32(static_cast<uint32_t>(q.program.headers.size()));
  for (const cache::Header& h : q.program.headers) {
    w.str(h.include_name);
    w.str(h.content);
  }
  w.strs(q.program.name_expressions);
  w.strs(q.options);
  w.u8(q.lean ? 1 : 0);
  w.str(q.nvrtc_path);
  w.str(q.working_dir);
  w.str(q.pwd);
  return w.take();
}

ProgramRequest decode_program_request(std::string_view bytes) {
  ByteReader r(bytes, "program compile request");
  if (r.bytes(kProgramRequestMagic.size(), "magic") != kProgramRequestMagic) r.fail("bad magic");
  ProgramRequest q;
  q.program.source = std::string(r.str("source"));
  q.program.name = std::string(r.str("name"));
  uint32_t headers = r.u32("header count");
  if (headers > r.remaining() / 8) r.fail("header count past the end");
  for (uint32_t i = 0; i < headers; ++i) {
    cache::Header h;
    h.include_name = std::string(r.str("header name"));
    h.content = std::string(r.str("header content"));
    q.program.headers.push_back(std::move(h));
  }
  q.program.name_expressions = r.strs("name expressions");
  q.options = r.strs("options");
  q.lean = r.u8("lean") != 0;
  q.nvrtc_path = std::string(r.str("NVRTC path"));
  q.working_dir = std::string(r.str("working folder"));
  q.pwd = std::string(r.str("$PWD"));
  r.expect_end();
  return q;
}

std::string encode_program_answer(const ProgramAnswer& a) {
  ByteWriter w;
  w.bytes(kProgramAnswerMagic);
  w.strs(a.notices);
  w.str(a.unsealed);
  w.u8(a.result ? 1 : 0);
  if (!a.result) {
    w.str(a.error);
    return w.take();
  }
  const ProgramResult& p = *a.result;
  w.str(p.record.encode());
  cache::write_lowered_names(w, p.lowered_names);
  w.u8(static_cast<uint8_t>((p.hit ? 1 : 0) | (p.any_name ? 2 : 0) | (p.name_dependent ? 4 : 0)));
  w.u64(p.key.high);
  w.u64(p.key.low);
  w.str(p.not_stored);
  w.u32(p.compile_ms);
  w.str(p.miss_reason);
  return w.take();
}

ProgramAnswer decode_program_answer(std::string_view bytes) {
  ByteReader r(bytes, "kcache compile process's answer");
  if (r.bytes(kProgramAnswerMagic.size(), "magic") != kProgramAnswerMagic) r.fail("bad magic");
  ProgramAnswer a;
  a.notices = r.strs("notices");
  a.unsealed = std::string(r.str("why not sealed"));
  if (r.u8("has result") == 0) {
    a.error = std::string(r.str("error"));
    r.expect_end();
    return a;
  }
  ProgramResult p;
  p.record = cache::ProgramRecord::decode(r.str("program record"), "a compile process's record");
  p.lowered_names = cache::read_lowered_names(r);
  uint8_t flags = r.u8("flags");
  p.hit = flags & 1;
  p.any_name = flags & 2;
  p.name_dependent = flags & 4;
  p.key.high = r.u64("key");
  p.key.low = r.u64("key");
  p.not_stored = std::string(r.str("why not stored"));
  p.compile_ms = r.u32("compile ms");
  p.miss_reason = std::string(r.str("why it missed"));
  r.expect_end();
  a.result = std::move(p);
  return a;
}

}  // namespace kcache::compiler
