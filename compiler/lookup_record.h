// Lookup records: a lookup that skips the include resolution when nothing it
// would look at on the disk has changed (ccache's direct mode goes one step
// further than our manifests in the same way: by the files' stats).
//
// A lookup resolves every include again (hundreds of stats through the -I
// folders, every header's bytes read or memoised, the toolkit probes of a
// manifest) to compute the key it looks up. Most of the time the disk is as
// it was, and the key comes out the same. So a lookup that found every
// target records, under a record key (everything the lookup started from:
// the source, the options, the folders, the compiler, the environment it
// reads, today's __DATE__), what it looked at on the disk and the keys it found: a lookup
// record (cache/format/manifest.h, local store only). The next lookup of the same
// record key stats those paths once each; where every one is as
// recorded it looks up the recorded keys, and otherwise takes the long way.
//
// What is recorded (DiskObservations): every stat a lookup made, by the
// absolute path it named, with its outcome:
//  - a file that was there: its device, inode, size, mtime and ctime, where
//    that stamp stands for its bytes (common/stamp_trust.h: older than the
//    writeback window when the lookup started, on a file system whose
//    stamps hold); where one does not, no record is written (a later
//    lookup, through a manifest, writes it once the file has settled);
//  - a folder: that it is one (what a lookup takes from its stat);
//  - a path that was not there: the path, checked by one stat of its own to
//    be "not there" again (ENOENT or ENOTDIR, as the lookup took either).
//    Not its folder's stamp: a program writing a log into its working
//    folder would invalidate every record. Beneath the toolkit's folders,
//    which no program writes into, by the settled stamp of the deepest
//    folder on its path that exists (any entry made in it moves that stamp).
// A record is written only where no stat failed other than "not there" and
// where the compile uses no time macro. Paths beneath the program's folder
// are recorded relative to it for a program shared by every folder
// (compiler.h's name_free), so CuPy's default mode (a new temporary folder
// per program) finds the record too, except the names its manifest keyed by
// their absolute name (a computed include built by token pasting): a record
// keys a name exactly as its manifest did.
//
// Soundness: the lookup is a function of its record key's inputs and of the
// outcomes of the stats it makes; a record says that those outcomes are
// unchanged, so the lookup would compute the same keys again. The record key
// hashes every field of CompileOptions the lookup reads (compiler.cc's
// record_key: a new field must be added there); a compile whose files are
// limited by may_read (Bazel's worker) has no lookup record.
// KCACHE_LOOKUP_RECORDS=off turns them off (to measure what they save).
#pragma once

#include <sys/stat.h>

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "cache/format/manifest.h"

namespace kcache::compiler {

// Records what this thread's lookups look at while it lives (one per thread
// at a time; nesting keeps the outer one).
class DiskObservations {
 public:
  DiskObservations();
  ~DiskObservations();
  DiskObservations(const DiskObservations&) = delete;
  DiskObservations& operator=(const DiskObservations&) = delete;

  void record(const std::string& path, int stat_result, int stat_errno, const struct stat& st);
  // Something the record cannot express happened (a stat failing otherwise
  // than "not there"): no record.
  void spoil() { spoiled_ = true; }

  // What a later lookup checks, or nullopt when no record may be written.
  // Paths beneath `relative_to` (an absolute folder; empty: none) are
  // written as kSourceFolderPrefix + the rest.
  // Paths in `keyed_absolutely` stay absolute wherever they are.
  // An absent name beneath one of `quiet_folders` (absolute: the toolkit's,
  // which no program writes into) is checked by the stamp of the deepest
  // folder on its path that exists, where that stamp has settled (older
  // than the writeback window): one stat answers for the hundreds of names
  // NVRTC's search finds absent there. Elsewhere each is its own stat.
  std::optional<std::vector<cache::ManifestProbe>> probes(
      const std::string& relative_to, const std::set<std::string>& keyed_absolutely = {},
      const std::vector<std::string>& quiet_folders = {}) const;

 private:
  struct Seen {
    bool there = false;
    bool folder = false;
    uint64_t dev = 0, ino = 0, size = 0, mtime_ns = 0, ctime_ns = 0;
  };
  std::map<std::string, Seen> seen_;
  bool spoiled_ = false;
  int64_t started_ns_ = 0;
  std::string cwd_;
  DiskObservations* outer_ = nullptr;
};

// The stat every lookup makes goes through here: ::stat, recorded when this
// thread records.
int observed_stat(const std::string& path, struct stat* st);

// Records `path` as a lookup of this thread saw it now, if it records (a read
// that did not stat first).
void observe_path(const std::string& path);

// Whether this thread's lookup is being recorded: a lookup then stats every
// name it checks (no folder's stamp answers for names beneath it).
bool recording_lookup();

// Tests that edit files faster than the writeback window: the window of
// common/stamp_trust.h (it must stay above the file system's timestamp
// granularity; mapped writes within it go unseen).
void set_too_new_margin_for_testing(int64_t ns);

// A recorded path beneath the program's folder.
constexpr char kSourceFolderPrefix[] = "program-folder:";

// True where every recorded path is as recorded; `source_folder` is the
// absolute folder kSourceFolderPrefix paths are beneath now.
bool disk_unchanged(const std::vector<cache::ManifestProbe>& probes,
                    const std::string& source_folder);

// The same for a record as the store holds it (`encoded`, filed under `key`;
// `what` names it in errors), read in place (cache::read_lookup_record): its
// results where every recorded path is as recorded, else nullopt. Throws
// CorruptError or IncompatibleVersionError for a record it cannot read.
std::optional<std::vector<cache::ManifestResult>> record_holds(std::string_view encoded,
                                                               const Hash128& key,
                                                               const std::string& what,
                                                               const std::string& source_folder);

}  // namespace kcache::compiler
