// Learned runtimes: what finished jobs actually ran, per (user, job name), so that reservations and
// backfill can estimate jobs whose owners gave no expected_runtime. The estimate is the longest of the
// last kKeep runs of the same user and name (conservative: under-estimates would let backfill delay a
// reservation), or none when there is no history. Value type, thread-compatible; the caller (simulator
// or controller) records completions and passes it in the Snapshot.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <utility>

#include "core/sched/job.h"

namespace tessera {

class RuntimeHistory {
 public:
  static constexpr size_t kKeep = 5;
  // A job that finished on its own after running `runtime` seconds (preempted runs are not recorded).
  void record(const std::string& user, const std::string& name, Duration runtime);
  std::optional<Duration> estimate(const std::string& user, const std::string& name) const;
  size_t size() const { return runs_.size(); }

 private:
  std::map<std::pair<std::string, std::string>, std::deque<Duration>> runs_;
};

// The runtime the scheduler assumes for a job: expected_runtime (capped by max_runtime), else the
// learned estimate (capped by max_runtime), else max_runtime, else `fallback`.
Duration assumed_runtime(const Job& job, const RuntimeHistory* history, Duration fallback);

}  // namespace tessera
