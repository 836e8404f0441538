#include "cache/format/manifest.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>

#include "common/bytes.h"
#include "common/error.h"
#include "common/paths.h"
#include "common/safe_path.h"

namespace kcache::cache {
namespace {

constexpr size_t kChecksumSize = 8;
constexpr const char* kManifestFolder = "manifests";

// Big-endian halves, so the 16 bytes read like the key's hex form (as entries).
void write_key(ByteWriter& w, const Hash128& key) {
  for (uint64_t half : {key.high, key.low}) {
    for (int shift = 56; shift >= 0; shift -= 8) w.u8(static_cast<uint8_t>(half >> shift));
  }
}

Hash128 read_key(ByteReader& r) {
  // One read of 16 bytes, not 16 of one: a lookup record holds one per file.
  const std::string_view b = r.bytes(16, "key");
  Hash128 key;
  for (int i = 0; i < 8; ++i) {
    key.high = (key.high << 8) | static_cast<uint8_t>(b[i]);
    key.low = (key.low << 8) | static_cast<uint8_t>(b[8 + i]);
  }
  return key;
}

// Why a name may not be stored, or empty.
std::string name_problem(std::string_view text, const char* field) {
  if (text.empty()) return std::string(field) + " is empty";
  if (text.size() > kMaxManifestNameBytes) {
    return std::string(field) + " is " + std::to_string(text.size()) + " bytes, more than " +
           std::to_string(kMaxManifestNameBytes);
  }
  if (find_control_character(text) != std::string_view::npos) {
    return std::string(field) + " \"" + escape_for_message(text) + "\" holds a control character";
  }
  return "";
}

std::string_view name_view(ByteReader& r, const char* field) {
  std::string_view text = r.str(field);
  std::string problem = name_problem(text, field);
  if (!problem.empty()) r.fail(problem);
  return text;
}

std::string name(ByteReader& r, const char* field) { return std::string(name_view(r, field)); }

// A count read from the input: at least 1, at most `max`, and no more than
// the bytes left could hold (`min_bytes` each), so a tampered count fails fast.
uint32_t count(ByteReader& r, const char* field, size_t max, size_t min_bytes) {
  uint32_t n = r.u32(field);
  if (n == 0) r.fail(std::string(field) + " is 0");
  if (n > max) {
    r.fail(std::string(field) + " " + std::to_string(n) + " is more than " + std::to_string(max));
  }
  if (n > r.remaining() / min_bytes) r.fail(std::string(field) + " past the end");
  return n;
}

// Like count(), where 0 is allowed.
uint32_t count_or_none(ByteReader& r, const char* field, size_t max, size_t min_bytes) {
  uint32_t n = r.u32(field);
  if (n > max) {
    r.fail(std::string(field) + " " + std::to_string(n) + " is more than " + std::to_string(max));
  }
  if (n > r.remaining() / min_bytes) r.fail(std::string(field) + " past the end");
  return n;
}

// One probe (the format's `probe`), checked as decode() checks it.
ProbeView read_probe(ByteReader& body) {
  ProbeView p;
  uint8_t state = body.u8("probe state");
  if (state > 2) body.fail("probe state is " + std::to_string(state) + ", not 0, 1 or 2");
  p.present = state == 1;
  p.has_folder = state == 2;
  p.path = name_view(body, "probe path");
  if (p.present) {
    p.content = read_key(body);
    for (uint64_t* v : {&p.dev, &p.ino, &p.size, &p.mtime_ns, &p.ctime_ns}) {
      *v = body.u64("probe stat");
    }
  } else if (p.has_folder) {
    p.folder_depth = body.u32("probe folder depth");
    if (p.folder_depth > kMaxManifestNameBytes) {
      body.fail("probe folder depth " + std::to_string(p.folder_depth) +
                " is deeper than a name can be");
    }
    for (uint64_t* v : {&p.dev, &p.ino, &p.mtime_ns, &p.ctime_ns}) {
      *v = body.u64("probe folder stat");
    }
  }
  return p;
}

constexpr size_t kMinProbe = 1 + 4 + 1;
constexpr size_t kMinResult = 1 + 4 + 1 + 1 + 16;

ManifestResult read_result(ByteReader& body) {
  ManifestResult res;
  uint8_t kind = body.u8("result kind");
  if (kind > 1) body.fail("result kind is " + std::to_string(kind) + ", not 0 or 1");
  res.cubin = kind == 1;
  res.arch = name(body, "result arch");
  uint8_t any = body.u8("result any_name");
  if (any > 1) body.fail("result any_name is " + std::to_string(any) + ", not 0 or 1");
  res.any_name = any == 1;
  res.key = read_key(body);
  return res;
}

void check_set(const ManifestSet& set) {
  auto bad = [](const std::string& why) {
    throw InvalidArgument("a manifest set cannot be stored: " + why);
  };
  if (set.empty() && set.probes.empty()) bad("it has no asks and no probes");
  if (set.size() > kMaxManifestAsks) bad(std::to_string(set.size()) + " asks");
  if (set.probes.size() > kMaxManifestProbes) bad(std::to_string(set.probes.size()) + " probes");
  for (const ManifestProbe& p : set.probes) {
    std::string problem = name_problem(p.path, "probe path");
    if (!problem.empty()) bad(problem);
    if (p.present && p.has_folder) bad("probe " + p.path + " is present and has a folder");
  }
  if (set.results.size() > kMaxManifestResults) {
    bad(std::to_string(set.results.size()) + " results");
  }
  for (const ManifestResult& r : set.results) {
    std::string problem = name_problem(r.arch, "result arch");
    if (!problem.empty()) bad(problem);
  }
  for (const ManifestAsk& a : set) {
    for (const auto& [text, field] :
         {std::pair<const std::string&, const char*>{a.spelling, "spelling"},
          {a.includer, "includer"}}) {
      std::string problem = name_problem(text, field);
      if (!problem.empty()) bad(problem);
    }
    if (a.headers.empty() || a.headers.size() > kMaxManifestHeadersPerAsk) {
      bad(std::to_string(a.headers.size()) + " headers for one ask");
    }
    for (const ManifestHeader& h : a.headers) {
      std::string problem = name_problem(h.name, "header name");
      if (!problem.empty()) bad(problem);
    }
  }
}

std::string errno_text(const std::string& what, const std::string& path) {
  return errno_message(what, path, errno);
}

}  // namespace

Hash128 manifest_key(const Hash128& scanner_key) {
  ByteWriter w;
  w.str("kcache-manifest");
  write_key(w, scanner_key);
  return xxh3_128(w.data());
}

ManifestProbe ProbeView::owned() const {
  ManifestProbe p;
  p.path = std::string(path);
  p.present = present;
  p.has_folder = has_folder;
  p.content = content;
  p.folder_depth = folder_depth;
  p.dev = dev;
  p.ino = ino;
  p.size = size;
  p.mtime_ns = mtime_ns;
  p.ctime_ns = ctime_ns;
  return p;
}

std::string Manifest::encode() const {
  ByteWriter w;
  // Without results (every regular manifest) the bytes are format 2's, so a
  // kcache from before format 3 sharing the store or the remote still reads them.
  const bool results = std::any_of(sets_.begin(), sets_.end(),
                                   [](const ManifestSet& set) { return !set.results.empty(); });
  w.bytes(kManifestMagic);
  w.u16(results ? kManifestFormatVersion : 2);
  w.u16(0);  // reserved
  write_key(w, key_);
  w.u32(static_cast<uint32_t>(sets_.size()));
  for (const ManifestSet& set : sets_) {
    w.u32(static_cast<uint32_t>(set.size()));
    for (const ManifestAsk& a : set) {
      w.str(a.spelling);
      w.str(a.includer);
      w.u8(a.angled ? 1 : 0);
      w.u32(static_cast<uint32_t>(a.headers.size()));
      for (const ManifestHeader& h : a.headers) {
        w.str(h.name);
        w.u64(h.content_hash);
      }
    }
    w.u32(static_cast<uint32_t>(set.probes.size()));
    for (const ManifestProbe& p : set.probes) {
      w.u8(p.present ? 1 : p.has_folder ? 2 : 0);
      w.str(p.path);
      if (p.present) {
        write_key(w, p.content);
        for (uint64_t v : {p.dev, p.ino, p.size, p.mtime_ns, p.ctime_ns}) w.u64(v);
      } else if (p.has_folder) {
        w.u32(p.folder_depth);
        for (uint64_t v : {p.dev, p.ino, p.mtime_ns, p.ctime_ns}) w.u64(v);
      }
    }
    if (!results) continue;
    w.u32(static_cast<uint32_t>(set.results.size()));
    for (const ManifestResult& r : set.results) {
      w.u8(r.cubin ? 1 : 0);
      w.str(r.arch);
      w.u8(r.any_name ? 1 : 0);
      write_key(w, r.key);
    }
  }
  uint64_t checksum = xxh3_64(w.data());
  w.u64(checksum);
  return w.take();
}

namespace {

// `bytes` checked up to its sets (size, magic, version, checksum, reserved,
// key): the reader of what follows the key; `version` set.
ByteReader checked_body(std::string_view bytes, const Hash128& expected_key,
                        const std::string& what, uint16_t* version) {
  ByteReader r(bytes, what);
  if (bytes.size() > kMaxManifestBytes) {
    r.fail(std::to_string(bytes.size()) + " bytes, more than a manifest may hold (" +
           std::to_string(kMaxManifestBytes) + ")");
  }
  if (bytes.size() < kManifestMagic.size() + 2 + kChecksumSize) {
    r.fail(bytes.empty() ? "empty" : "only " + std::to_string(bytes.size()) + " bytes");
  }
  if (r.bytes(kManifestMagic.size(), "magic") != kManifestMagic) r.fail("bad magic");
  *version = r.u16("format version");
  if (*version == 0 || *version > kManifestFormatVersion) {
    throw IncompatibleVersionError(what + " has manifest format version " +
                                   std::to_string(*version) + ", newer than this kcache reads (" +
                                   std::to_string(kManifestFormatVersion) + "); upgrade kcache");
  }
  // Checksum before interpreting the rest, so a damaged count cannot mislead us.
  std::string_view covered = bytes.substr(0, bytes.size() - kChecksumSize);
  ByteReader tail(bytes.substr(covered.size()), what);
  if (tail.u64("checksum") != xxh3_64(covered)) r.fail("checksum mismatch");

  ByteReader body(covered, what);
  body.bytes(kManifestMagic.size() + 2, "magic and version");
  if (body.u16("reserved") != 0) body.fail("reserved bytes set");
  const Hash128 key = read_key(body);
  if (key != expected_key) {
    body.fail("holds the manifest for " + key.hex() + ", not " + expected_key.hex());
  }
  return body;
}

constexpr size_t kMinSet = 4 + 4;

}  // namespace

Manifest Manifest::decode(std::string_view bytes, const Hash128& expected_key,
                          const std::string& what) {
  uint16_t version = 0;
  ByteReader body = checked_body(bytes, expected_key, what, &version);
  Manifest m(expected_key);
  // Smallest encodings: an ask is 2 strs + angled + count + one header (str + u64).
  constexpr size_t kMinHeader = 4 + 1 + 8;
  constexpr size_t kMinAsk = 4 + 1 + 4 + 1 + 1 + 4 + kMinHeader;
  uint32_t sets = count(body, "set count", kMaxManifestSets, kMinSet);
  for (uint32_t s = 0; s < sets; ++s) {
    ManifestSet set;
    uint32_t asks = version == 1 ? count(body, "ask count", kMaxManifestAsks, kMinAsk)
                                 : count_or_none(body, "ask count", kMaxManifestAsks, kMinAsk);
    for (uint32_t i = 0; i < asks; ++i) {
      ManifestAsk a;
      a.spelling = name(body, "spelling");
      a.includer = name(body, "includer");
      uint8_t angled = body.u8("angled");
      if (angled > 1) body.fail("angled is " + std::to_string(angled) + ", not 0 or 1");
      a.angled = angled == 1;
      uint32_t headers = count(body, "header count", kMaxManifestHeadersPerAsk, kMinHeader);
      for (uint32_t h = 0; h < headers; ++h) {
        ManifestHeader header;
        header.name = name(body, "header name");
        header.content_hash = body.u64("content hash");
        a.headers.push_back(std::move(header));
      }
      set.push_back(std::move(a));
    }
    if (version >= 2) {
      uint32_t probes = count_or_none(body, "probe count", kMaxManifestProbes, kMinProbe);
      if (probes == 0 && asks == 0) body.fail("set " + std::to_string(s) + " is empty");
      set.probes.reserve(probes);  // bounded by the bytes left (count_or_none)
      for (uint32_t i = 0; i < probes; ++i) {
        set.probes.push_back(read_probe(body).owned());
      }
    }
    if (version >= 3) {
      uint32_t results = count_or_none(body, "result count", kMaxManifestResults, kMinResult);
      for (uint32_t i = 0; i < results; ++i) set.results.push_back(read_result(body));
    }
    if (std::find(m.sets_.begin(), m.sets_.end(), set) != m.sets_.end()) {
      body.fail("set " + std::to_string(s) + " repeats an earlier one");
    }
    m.sets_.push_back(std::move(set));
  }
  body.expect_end();
  return m;
}

std::optional<std::vector<ManifestResult>> read_lookup_record(
    std::string_view bytes, const Hash128& expected_key, const std::string& what,
    const std::function<bool(const ProbeView&)>& probe) {
  uint16_t version = 0;
  ByteReader body = checked_body(bytes, expected_key, what, &version);
  if (version < 3) return std::nullopt;  // no results: not a record
  if (count(body, "set count", kMaxManifestSets, kMinSet) != 1) return std::nullopt;
  if (body.u32("ask count") != 0) return std::nullopt;  // a record has none
  const uint32_t probes = count(body, "probe count", kMaxManifestProbes, kMinProbe);
  for (uint32_t i = 0; i < probes; ++i) {
    if (!probe(read_probe(body))) return std::nullopt;
  }
  const uint32_t results = count_or_none(body, "result count", kMaxManifestResults, kMinResult);
  std::vector<ManifestResult> out;
  out.reserve(results);
  for (uint32_t i = 0; i < results; ++i) out.push_back(read_result(body));
  body.expect_end();
  return out;
}

void Manifest::add(ManifestSet set) {
  check_set(set);
  Manifest alone(key_);
  alone.sets_.push_back(set);
  if (alone.encode().size() > kMaxManifestBytes) {
    throw InvalidArgument("a manifest set of more than " + std::to_string(kMaxManifestBytes) +
                          " bytes cannot be stored");
  }
  sets_.erase(std::remove(sets_.begin(), sets_.end(), set), sets_.end());
  sets_.insert(sets_.begin(), std::move(set));
  if (sets_.size() > kMaxManifestSets) sets_.resize(kMaxManifestSets);
  while (sets_.size() > 1 && encode().size() > kMaxManifestBytes) sets_.pop_back();
}

std::string manifest_path(const std::string& store_dir, const Hash128& key) {
  std::string hex = key.hex();  // hex digits only, by type: no traversal
  return store_dir + "/" + kManifestFolder + "/" + hex.substr(0, 2) + "/" + hex;
}

std::optional<std::string> read_manifest_file(const std::string& store_dir, const Hash128& key) {
  const std::string path = manifest_path(store_dir, key);
  std::optional<FileInfo> info = FileSystem::real().stat(path);
  if (!info) return std::nullopt;
  if (info->size > kMaxManifestBytes) {  // not read: a crafted file costs no memory
    throw CorruptError("manifest " + path + " is " + std::to_string(info->size) +
                       " bytes, more than a manifest may hold (" +
                       std::to_string(kMaxManifestBytes) + ")");
  }
  return FileSystem::real().read_file(path);
}

void write_manifest_file(const std::string& store_dir, const Manifest& manifest) {
  const std::string path = manifest_path(store_dir, manifest.key());
  const std::string folder = parent_folder(path);
  FileSystem::real().create_directories(folder, 0700);
  static std::atomic<uint64_t> serial{0};
  const std::string temp =
      path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(serial.fetch_add(1));
  const std::string bytes = manifest.encode();
  int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) throw IoError(errno_text("cannot create", temp));
  size_t written = 0;
  bool ok = true;
  while (ok && written < bytes.size()) {
    ssize_t n = ::write(fd, bytes.data() + written, bytes.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0)
      ok = false;
    else
      written += static_cast<size_t>(n);
  }
  // No fsync (it cost a drop-in miss ~5 ms, twice: its manifest and its
  // lookup record): a power loss may leave the name on torn bytes, which the
  // checksum makes a miss that the next write replaces, as for a blob file
  // (never synced either) and the index (synchronous = OFF). A killed
  // process leaves at most its temp file.
  int err = errno;
  if (::close(fd) != 0 && ok) {
    ok = false;
    err = errno;
  }
  if (!ok || ::rename(temp.c_str(), path.c_str()) != 0) {
    if (ok) err = errno;
    ::unlink(temp.c_str());
    throw IoError(errno_message("cannot write", path, err));
  }
}

uint64_t remove_manifest_files(const std::string& store_dir, FileSystem& fs) {
  const std::string root = store_dir + "/" + kManifestFolder;
  uint64_t removed = 0;
  for (const std::string& shard : fs.list_directory(root)) {
    const std::string folder = root + "/" + shard;
    for (const std::string& file : fs.list_directory(folder)) {
      if (fs.remove_file(folder + "/" + file)) ++removed;
    }
  }
  return removed;
}

void touch_manifest_file(const std::string& store_dir, const Hash128& key) {
  ::utimensat(AT_FDCWD, manifest_path(store_dir, key).c_str(), nullptr, 0);
}

std::vector<ManifestFile> list_manifest_files(const std::string& store_dir, FileSystem& fs) {
  const std::string root = store_dir + "/" + kManifestFolder;
  std::vector<ManifestFile> files;
  for (const std::string& shard : fs.list_directory(root)) {
    const std::string folder = root + "/" + shard;
    std::optional<FileInfo> folder_info = fs.stat(folder);
    if (!folder_info || !folder_info->is_directory) {
      if (folder_info) files.push_back({folder, std::nullopt, *folder_info});  // a stray file
      continue;
    }
    for (const std::string& name : fs.list_directory(folder)) {
      ManifestFile file;
      file.path = folder + "/" + name;
      std::optional<FileInfo> info = fs.stat(file.path);
      if (!info || info->is_directory) continue;  // gone meanwhile, or not ours
      file.info = *info;
      // Only the exact name manifest_path() gives: from_hex alone would take
      // upper case, and a file in another shard is never read.
      std::optional<Hash128> key = Hash128::from_hex(name);
      if (key && key->hex() == name && name.compare(0, 2, shard) == 0 && shard.size() == 2) {
        file.key = key;
      }
      files.push_back(std::move(file));
    }
  }
  return files;
}

}  // namespace kcache::cache
