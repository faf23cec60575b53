// The data directory's lock and modes (see data_dir.h).
#include "server/data_dir.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

namespace tessera::server {
namespace {

std::string errno_text(int err) { return std::strerror(err); }

std::string octal(mode_t mode) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "0%03o", static_cast<unsigned>(mode & 07777));
  return buf;
}

// kUnavailable: held by someone else (as opposed to a directory that cannot be used at all).
Error held(const std::string& dir, const std::string& detail = "") {
  return {ErrorCode::kUnavailable, "a tessera server holds " + dir + "; stop it first" + detail};
}

// flock(LOCK_EX | LOCK_NB) on `fd`, retried on EINTR. Returns 0 or the errno.
int try_flock(int fd) {
  for (;;) {
    if (::flock(fd, LOCK_EX | LOCK_NB) == 0) return 0;
    if (errno != EINTR) return errno;
  }
}

}  // namespace

DataDirLock::DataDirLock(DataDirLock&& other) noexcept : dir_fd_(other.dir_fd_), legacy_fd_(other.legacy_fd_) {
  other.dir_fd_ = other.legacy_fd_ = -1;
}

DataDirLock& DataDirLock::operator=(DataDirLock&& other) noexcept {
  if (this != &other) {
    release();
    dir_fd_ = other.dir_fd_;
    legacy_fd_ = other.legacy_fd_;
    other.dir_fd_ = other.legacy_fd_ = -1;
  }
  return *this;
}

DataDirLock::~DataDirLock() { release(); }

void DataDirLock::release() {
  // Closing the only fd of the open file description drops its flock.
  if (legacy_fd_ >= 0) ::close(legacy_fd_);
  if (dir_fd_ >= 0) ::close(dir_fd_);
  dir_fd_ = legacy_fd_ = -1;
}

Result<DataDirLock> lock_data_dir(const std::string& dir, const WarnFn& warn) {
  if (Status s = ensure_private_dir(dir, warn); !s.ok()) return s.error();
  DataDirLock lock;
  lock.dir_fd_ = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (lock.dir_fd_ < 0) return internal_error(dir + ": cannot open the directory to lock it: " + errno_text(errno));
  if (int err = try_flock(lock.dir_fd_); err != 0) {
    if (err == EWOULDBLOCK) return held(dir);
    return internal_error(dir + ": cannot lock the directory: " + errno_text(err));
  }
  // A server of an older release locks DIR/tessera.lock instead: honour (and hold) that one too
  // where it exists, so that neither can start beside the other during an upgrade.
  const std::string legacy = (std::filesystem::path(dir) / "tessera.lock").string();
  lock.legacy_fd_ = ::open(legacy.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW);
  if (lock.legacy_fd_ >= 0) {
    if (int err = try_flock(lock.legacy_fd_); err != 0) {
      if (err == EWOULDBLOCK) return held(dir, " (it holds " + legacy + ")");
      return internal_error(legacy + ": cannot lock: " + errno_text(err));
    }
  }
  return lock;
}

Status ensure_private_dir(const std::string& dir, const WarnFn& warn) {
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) {
    std::error_code ec;
    std::filesystem::path parent = std::filesystem::path(dir).parent_path();
    if (!parent.empty()) std::filesystem::create_directories(parent, ec);
    if (ec) return internal_error(parent.string() + ": cannot create directory: " + ec.message());
    if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
      return internal_error(dir + ": cannot create directory: " + errno_text(errno));
    }
    if (::stat(dir.c_str(), &st) != 0) return internal_error(dir + ": " + errno_text(errno));
  }
  if (!S_ISDIR(st.st_mode)) return failed_precondition(dir + " exists and is not a directory");
  if ((st.st_mode & 077) == 0) return {};
  const mode_t tight = st.st_mode & 0700;
  if (::chmod(dir.c_str(), tight) != 0) {
    return internal_error(dir + ": cannot restrict the data directory to its owner (chmod " + octal(tight) +
                          "): " + errno_text(errno));
  }
  if (warn) warn("tightened the data directory " + dir + " from " + octal(st.st_mode) + " to " + octal(tight));
  return {};
}

Status make_file_private(const std::string& path, const WarnFn& warn) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return {};
    return internal_error(path + ": " + errno_text(errno));
  }
  if (!S_ISREG(st.st_mode) || (st.st_mode & 077) == 0) return {};
  const mode_t tight = st.st_mode & 0700;
  if (::chmod(path.c_str(), tight) != 0) {
    return internal_error(path + ": cannot restrict to its owner (chmod " + octal(tight) + "): " + errno_text(errno));
  }
  if (warn) warn("tightened " + path + " from " + octal(st.st_mode) + " to " + octal(tight));
  return {};
}

Result<int> create_private_file(const std::string& path, int flags) {
  const int fd = ::open(path.c_str(), flags | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) return internal_error(path + ": cannot create: " + errno_text(errno));
  if (::fchmod(fd, 0600) != 0) {
    const int err = errno;
    ::close(fd);
    return internal_error(path + ": cannot set mode 0600: " + errno_text(err));
  }
  return fd;
}

Status fsync_path(const std::string& path, bool directory) {
  int fd = ::open(path.c_str(), (directory ? O_RDONLY | O_DIRECTORY : O_RDONLY) | O_CLOEXEC);
  if (fd < 0) return internal_error(path + ": cannot open for fsync: " + errno_text(errno));
  int rc = ::fsync(fd);
  int err = errno;
  ::close(fd);
  if (rc != 0) return internal_error(path + ": fsync failed: " + errno_text(err));
  return {};
}

}  // namespace tessera::server
