// The server's data directory (DIR of `tessera server --data DIR`): the lock that keeps one server
// (or one `admin restore`) per directory, and the modes that keep the store private (DIR 0700, its
// files 0600, whatever the umask).
// Not thread-safe beyond value semantics; DataDirLock is move-only and unlocks when destroyed.
#pragma once

#include <functional>
#include <string>

#include "core/status.h"

namespace tessera::server {

// Receives one warning line (e.g. "tightened DIR from 0755 to 0700").
using WarnFn = std::function<void(const std::string&)>;

// An exclusive flock(2) on the directory itself (an fd of DIR opened O_DIRECTORY), held while the
// object lives. Unlike a lock file it cannot be removed from under the holder; the kernel drops it
// when the process dies, so a restart after kill -9 is not blocked.
class DataDirLock {
 public:
  DataDirLock() = default;
  DataDirLock(DataDirLock&& other) noexcept;
  DataDirLock& operator=(DataDirLock&& other) noexcept;
  DataDirLock(const DataDirLock&) = delete;
  DataDirLock& operator=(const DataDirLock&) = delete;
  ~DataDirLock();
  bool held() const { return dir_fd_ >= 0; }

 private:
  friend Result<DataDirLock> lock_data_dir(const std::string& dir, const WarnFn& warn);
  void release();
  int dir_fd_ = -1;
  int legacy_fd_ = -1;  // DIR/tessera.lock where an older server left one (older servers lock it)
};

// Creates DIR (0700, see ensure_private_dir) if missing and takes its lock. Refused while another
// process (or another DataDirLock in this one) holds it, with ErrorCode::kUnavailable and "a tessera
// server holds DIR; stop it first".
Result<DataDirLock> lock_data_dir(const std::string& dir, const WarnFn& warn = nullptr);

// mkdir DIR (0700) and its missing parents; an existing DIR with group or other permission bits is
// tightened to owner-only (reported through `warn`). A non-directory at DIR is an error.
Status ensure_private_dir(const std::string& dir, const WarnFn& warn);

// Clears the group and other bits of an existing file (reported through `warn`); missing: nothing.
Status make_file_private(const std::string& path, const WarnFn& warn);

// Opens `path` with flags `flags | O_CREAT` and mode 0600, then fchmods it to 0600 (a umask cannot
// widen or narrow it). Returns the fd (the caller closes it).
Result<int> create_private_file(const std::string& path, int flags);

// fsync of a file, or of a directory (its entries).
Status fsync_path(const std::string& path, bool directory);

}  // namespace tessera::server
