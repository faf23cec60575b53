#include "core/sched/runtime_history.h"

#include <algorithm>

namespace tessera {

void RuntimeHistory::record(const std::string& user, const std::string& name, Duration runtime) {
  if (runtime <= 0) return;
  auto& d = runs_[{user, name}];
  d.push_back(runtime);
  while (d.size() > kKeep) d.pop_front();
}

std::optional<Duration> RuntimeHistory::estimate(const std::string& user, const std::string& name) const {
  auto it = runs_.find({user, name});
  if (it == runs_.end() || it->second.empty()) return std::nullopt;
  return *std::max_element(it->second.begin(), it->second.end());
}

Duration assumed_runtime(const Job& job, const RuntimeHistory* history, Duration fallback) {
  auto cap = [&](Duration d) { return job.max_runtime > 0 ? std::min(d, job.max_runtime) : d; };
  if (job.expected_runtime > 0) return cap(job.expected_runtime);
  if (history)
    if (auto e = history->estimate(job.user, job.name)) return cap(*e);
  if (job.max_runtime > 0) return job.max_runtime;
  return fallback;
}

}  // namespace tessera
