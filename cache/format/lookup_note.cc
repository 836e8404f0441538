#include "cache/format/lookup_note.h"

#include "common/bytes.h"
#include "common/error.h"
#include "common/file_system.h"
#include "common/safe_path.h"

namespace kcache::cache {
namespace {

void write_note_hash(ByteWriter& w, const Hash128& h) {
  w.u64(h.high);
  w.u64(h.low);
}

Hash128 read_note_hash(ByteReader& r, const char* field) {
  Hash128 h;
  h.high = r.u64(field);
  h.low = r.u64(field);
  return h;
}

std::string note_text_problem(std::string_view text) {
  if (text.size() > kMaxNoteTextBytes) {
    return std::to_string(text.size()) + " bytes, more than " + std::to_string(kMaxNoteTextBytes);
  }
  if (find_control_character(text) != std::string_view::npos) return "a control character";
  return "";
}

void write_note_list(ByteWriter& w, const std::vector<std::string>& items, const char* field) {
  if (items.size() > kMaxNoteItems) {
    throw InvalidArgument(std::string("a lookup note holds more ") + field + " than it may");
  }
  w.u32(static_cast<uint32_t>(items.size()));
  for (const std::string& s : items) {
    std::string problem = note_text_problem(s);
    if (!problem.empty())
      throw InvalidArgument(std::string("a lookup note's ") + field + ": " + problem);
    w.str(s);
  }
}

std::string read_note_text(ByteReader& r, const char* field) {
  std::string_view text = r.str(field);
  std::string problem = note_text_problem(text);
  if (!problem.empty()) r.fail(std::string(field) + " holds " + problem);
  return std::string(text);
}

std::vector<std::string> read_note_list(ByteReader& r, const char* count_field, const char* field) {
  uint32_t n = r.u32(count_field);
  if (n > kMaxNoteItems || n > r.remaining() / 4) r.fail(std::string(count_field) + " too large");
  std::vector<std::string> items;
  for (uint32_t i = 0; i < n; ++i) items.push_back(read_note_text(r, field));
  return items;
}

std::string note_path(const std::string& store_dir, const Hash128& key) {
  return store_dir + "/notes/" + std::to_string(key.low % kNoteSlots);
}

}  // namespace

std::string LookupNote::encode() const {
  ByteWriter w;
  w.bytes(kLookupNoteMagic);
  w.u16(kLookupNoteFormatVersion);
  write_note_hash(w, key);
  write_note_hash(w, source_hash);
  std::string problem = note_text_problem(toolkit);
  if (!problem.empty()) throw InvalidArgument("a lookup note's toolkit: " + problem);
  w.str(toolkit);
  write_note_list(w, options, "options");
  write_note_list(w, targets, "targets");
  std::vector<std::string> paths;
  for (const auto& [path, hash] : headers) paths.push_back(path);
  write_note_list(w, paths, "headers");  // checks the bounds
  ByteWriter hashes;
  for (const auto& [path, hash] : headers) hashes.u64(hash);
  w.bytes(hashes.data());
  w.u64(xxh3_64(w.data()));
  if (w.size() > kMaxNoteBytes) throw InvalidArgument("a lookup note is larger than it may be");
  return w.take();
}

LookupNote LookupNote::decode(std::string_view bytes, const std::string& what) {
  ByteReader r(bytes, what);
  if (bytes.size() < kLookupNoteMagic.size() + 2 + 8) r.fail("too short");
  if (r.bytes(kLookupNoteMagic.size(), "magic") != kLookupNoteMagic) r.fail("bad magic");
  uint16_t version = r.u16("format version");
  if (version == 0 || version > kLookupNoteFormatVersion) {
    throw IncompatibleVersionError(what + " has note format version " + std::to_string(version) +
                                   ", newer than this kcache reads");
  }
  std::string_view covered = bytes.substr(0, bytes.size() - 8);
  ByteReader tail(bytes.substr(covered.size()), what);
  if (tail.u64("checksum") != xxh3_64(covered)) r.fail("checksum mismatch");
  ByteReader body(covered, what);
  body.bytes(kLookupNoteMagic.size() + 2, "magic and version");
  LookupNote note;
  note.key = read_note_hash(body, "key");
  note.source_hash = read_note_hash(body, "source hash");
  note.toolkit = read_note_text(body, "toolkit");
  note.options = read_note_list(body, "option count", "option");
  note.targets = read_note_list(body, "target count", "target");
  std::vector<std::string> paths = read_note_list(body, "header count", "header");
  if (body.remaining() / 8 < paths.size()) body.fail("header hashes past the end");
  for (std::string& path : paths)
    note.headers.emplace_back(std::move(path), body.u64("header hash"));
  if (body.remaining() != 0) body.fail("bytes after the targets");
  return note;
}

std::optional<LookupNote> read_lookup_note(const std::string& store_dir, const Hash128& key) {
  const std::string path = note_path(store_dir, key);
  try {
    std::optional<FileInfo> info = FileSystem::real().stat(path);
    if (!info || info->is_directory || info->size > kMaxNoteBytes) return std::nullopt;
    std::optional<std::string> bytes = FileSystem::real().read_file(path);
    if (!bytes) return std::nullopt;
    LookupNote note = LookupNote::decode(*bytes, "lookup note " + path);
    if (note.key != key) return std::nullopt;  // another source's, in the same slot
    return note;
  } catch (const Error&) {
    return std::nullopt;
  }
}

void write_lookup_note(const std::string& store_dir, const LookupNote& note) {
  const std::string bytes = note.encode();
  FileSystem::real().create_directories(store_dir + "/notes", 0700);
  write_file_atomically(note_path(store_dir, note.key), bytes);
}

}  // namespace kcache::cache
