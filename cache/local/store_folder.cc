#include "cache/local/store_folder.h"

#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <mutex>
#include <vector>

#include "common/error.h"

namespace kcache::cache {
namespace {

// Whether `what` is said for the first time in this process. The lock is
// taken around fork() too: a child never inherits it held.
bool first_in_process(const std::string& what) {
  static std::mutex* mutex = new std::mutex;  // never destroyed: used at exit
  static std::set<std::string>* said = new std::set<std::string>;
  static const bool registered = [] {
    return pthread_atfork([] { mutex->lock(); }, [] { mutex->unlock(); },
                          [] { mutex->unlock(); }) == 0;
  }();
  (void)registered;
  std::lock_guard<std::mutex> lock(*mutex);
  return said->insert(what).second;
}

}  // namespace

StoreFolder::StoreFolder(std::string dir, FileSystem& fs,
                         std::function<void(const std::string&)> warn, std::optional<mode_t> umask)
    : dir_(std::move(dir)), fs_(fs), warn_(std::move(warn)), umask_(umask) {}

void StoreFolder::notice(const std::string& reason, const std::string& message) {
  if (!noticed_.insert(reason).second) return;
  if (!first_in_process(dir_ + '\n' + reason)) return;
  warn_(message);
}

void StoreFolder::make_folder(const std::string& folder) {
  if (folder == dir_) {
    const bool made = !fs_.stat(dir_);
    const mode_t mode = umask_ ? 0777 & ~*umask_ : kPrivateFolderMode;
    fs_.create_directories(dir_, mode);
    if (made && umask_) (void)::chmod(dir_.c_str(), mode);
    learn_sharing();
    return;
  }
  if (!shared_) {
    fs_.create_directories(folder, kPrivateFolderMode);
    return;
  }
  // The folders missing now are the ones this call makes (or a concurrent
  // one: then fixing them fails with EPERM, harmlessly, or does the same).
  std::vector<std::string> missing;
  for (std::string f = folder; f.size() > dir_.size() && !fs_.stat(f);
       f = f.substr(0, f.rfind('/'))) {
    missing.push_back(f);
  }
  fs_.create_directories(folder, folder_mode_);
  for (const std::string& f : missing) give_to_store(f, folder_mode_);
}

// The store folder's mode, group and owner decide those of what is made in
// it; a private store (0700, owned by this user, no umask setting) pays
// this stat at open and nothing per file.
void StoreFolder::learn_sharing() {
  struct stat st;
  if (::stat(dir_.c_str(), &st) != 0) return;
  owner_ = st.st_uid;
  group_ = st.st_gid;
  const bool root_in_others = ::geteuid() == 0 && st.st_uid != 0;
  if (umask_) {
    folder_mode_ = 0777 & ~*umask_;
    file_mode_ = 0666 & ~*umask_;
  } else {
    folder_mode_ = st.st_mode & 07777;
    // Blobs are never rewritten, only read, renamed and removed; the index
    // is written by every user who shares the store.
    file_mode_ = (st.st_mode & 0666) | 0644;
  }
  shared_ = umask_ || root_in_others || (st.st_mode & 0077) != 0;
}

void StoreFolder::write_file(const std::string& path, std::string_view bytes) {
  fs_.write_file_atomically(path, bytes, shared_ ? file_mode_ : 0644);
  if (shared_) give_to_store(path, file_mode_);
}

void StoreFolder::give_made_file(const std::string& path) {
  if (shared_) give_to_store(path, file_mode_);
}

// The process's umask cut the mode mkdir and open were given; root's files
// in another user's store go to that user (SQLite does the same for the
// journals of an index root opens).
void StoreFolder::give_to_store(const std::string& path, mode_t mode) {
  if (::geteuid() == 0 && owner_ != 0 && ::chown(path.c_str(), owner_, group_) != 0) {
    notice("chown", errno_message("cannot give to the store folder's owner", path, errno));
  }
  (void)::chmod(path.c_str(), mode);
}

void StoreFolder::remove_quietly(const std::string& path) {
  try {
    fs_.remove_file(path);
  } catch (const Error& e) {
    notice("remove", e.what());
  }
}

}  // namespace kcache::cache
