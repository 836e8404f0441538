// The store folder as the store writes into it: the owner, group and mode of
// what it makes (StoreOptions::umask, or those of a group-shared folder), and
// the notices it says (once per reason and folder per process).
//
// Private to cache/local/store.cc and its parts (store_index, store_blobs,
// store_recovery, store_deferred).
#pragma once

#include <sys/types.h>

#include <functional>
#include <optional>
#include <set>
#include <string>
#include <string_view>

#include "common/file_system.h"

namespace kcache::cache {

// A store folder made by kcache: private to its user (StoreOptions::umask
// and a group-shared folder say otherwise).
constexpr mode_t kPrivateFolderMode = 0700;

class StoreFolder {
 public:
  StoreFolder(std::string dir, FileSystem& fs, std::function<void(const std::string&)> warn,
              std::optional<mode_t> umask);

  const std::string& dir() const { return dir_; }
  FileSystem& fs() const { return fs_; }

  // Every store message a program can see: once per reason and store folder
  // per process, whichever of its threads' Stores meets it first.
  void notice(const std::string& reason, const std::string& message);

  // Creates `folder` (the store folder itself, or mkdir -p inside it) with
  // the store's owner, group and mode. Throws IoError.
  void make_folder(const std::string& folder);
  // Writes `path` atomically (a temporary name, then a rename) with the
  // store's owner, group and mode. Throws IoError.
  void write_file(const std::string& path, std::string_view bytes);
  // Gives a file another writer made in the store (SQLite's index) the
  // store's owner, group and mode, when the store is shared.
  void give_made_file(const std::string& path);
  // Removes `path`; a failure is a notice, not an error.
  void remove_quietly(const std::string& path);

 private:
  void learn_sharing();
  void give_to_store(const std::string& path, mode_t mode);

  const std::string dir_;
  FileSystem& fs_;
  std::function<void(const std::string&)> warn_;
  const std::optional<mode_t> umask_;
  std::set<std::string> noticed_;
  bool shared_ = false;  // learn_sharing()
  mode_t folder_mode_ = kPrivateFolderMode;
  mode_t file_mode_ = 0644;
  uid_t owner_ = 0;
  gid_t group_ = 0;
};

}  // namespace kcache::cache
