// DIR/tessera.db-state: the SQLite store's record, kept outside the database, of how many
// transactions it has committed and whether it is open. The database keeps the same count (meta
// key "store/commits", bumped in every transaction); a database that holds fewer commits than the
// record has lost acknowledged ones (a deleted or truncated -wal, an older copy put in its place).
// The record is rewritten after each commit without fsync: it is exact across process crashes and
// may lag after a power loss (then it under-reports, never over-reports).
// Not thread-safe: one writer (the store's writer thread; open/close around it).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "core/status.h"

namespace tessera::server {

struct CommitRecordState {
  bool open = false;    // a store has (or had, if it died) the database open
  int64_t commits = 0;  // transactions committed as of the last update
};

class CommitRecord {
 public:
  // The record at `path`: nullopt when there is none (a store created before records were kept, or
  // a fresh restore) or when it cannot be parsed (`*unreadable` then says why).
  static std::optional<CommitRecordState> read(const std::string& path, std::string* unreadable);

  CommitRecord() = default;
  CommitRecord(CommitRecord&& other) noexcept;
  CommitRecord& operator=(CommitRecord&& other) noexcept;
  ~CommitRecord();

  // Creates or opens `path` (mode 0600) and writes `state` durably (fsync of file and directory).
  static Result<CommitRecord> create(const std::string& path, CommitRecordState state);
  // Rewrites the record in place; `sync`: fsync it too. Best effort (the record only under-reports
  // when a write is lost); false if the write failed.
  bool update(CommitRecordState state, bool sync);
  const std::string& path() const { return path_; }

 private:
  int fd_ = -1;
  std::string path_;
};

}  // namespace tessera::server
