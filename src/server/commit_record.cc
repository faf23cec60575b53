// The store's commit record file (see commit_record.h). One fixed-size line, "open   N\n" or
// "closed N\n" with N in 20 digits, so that each update overwrites the whole line in place with one
// small pwrite (atomic with respect to a crash of the process).
#include "server/commit_record.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "server/data_dir.h"

namespace tessera::server {
namespace {

constexpr size_t kLineSize = 28;  // 6 + 1 + 20 + 1

std::string format_line(CommitRecordState s) {
  char buf[kLineSize + 1];
  std::snprintf(buf, sizeof buf, "%-6s %020" PRId64 "\n", s.open ? "open" : "closed", s.commits);
  return std::string(buf, kLineSize);
}

}  // namespace

std::optional<CommitRecordState> CommitRecord::read(const std::string& path, std::string* unreadable) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno != ENOENT && unreadable) *unreadable = path + ": " + std::strerror(errno);
    return std::nullopt;
  }
  char buf[kLineSize + 1] = {};
  const ssize_t n = ::pread(fd, buf, kLineSize, 0);
  ::close(fd);
  char state[8] = {};
  long long commits = -1;
  if (n != static_cast<ssize_t>(kLineSize) || std::sscanf(buf, "%7s %lld", state, &commits) != 2 || commits < 0 ||
      (std::strcmp(state, "open") != 0 && std::strcmp(state, "closed") != 0)) {
    if (unreadable) *unreadable = path + ": not a commit record (" + std::to_string(n < 0 ? 0 : n) + " bytes)";
    return std::nullopt;
  }
  return CommitRecordState{std::strcmp(state, "open") == 0, static_cast<int64_t>(commits)};
}

CommitRecord::CommitRecord(CommitRecord&& other) noexcept : fd_(other.fd_), path_(std::move(other.path_)) {
  other.fd_ = -1;
}

CommitRecord& CommitRecord::operator=(CommitRecord&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = other.fd_;
    path_ = std::move(other.path_);
    other.fd_ = -1;
  }
  return *this;
}

CommitRecord::~CommitRecord() {
  if (fd_ >= 0) ::close(fd_);
}

Result<CommitRecord> CommitRecord::create(const std::string& path, CommitRecordState state) {
  auto fd = create_private_file(path, O_RDWR);
  if (!fd) return fd.error();
  CommitRecord record;
  record.fd_ = *fd;
  record.path_ = path;
  if (::ftruncate(record.fd_, kLineSize) != 0 || !record.update(state, true)) {
    return internal_error(path + ": cannot write the commit record: " + std::strerror(errno));
  }
  std::string parent = std::filesystem::path(path).parent_path().string();
  if (Status s = fsync_path(parent.empty() ? "." : parent, true); !s.ok()) return s.error();
  return record;
}

bool CommitRecord::update(CommitRecordState state, bool sync) {
  if (fd_ < 0) return false;
  const std::string line = format_line(state);
  if (::pwrite(fd_, line.data(), line.size(), 0) != static_cast<ssize_t>(line.size())) return false;
  return !sync || ::fdatasync(fd_) == 0;
}

}  // namespace tessera::server
