#include "sim/job_log.h"

#include <cstdio>

#include "sim/sim_run.h"

namespace tessera::sim {

void JobWaitLog::attribute(Time t) {
  const double dt = double(t - last_t_);
  if (dt > 0)
    for (State& s : jobs_) {
      if (!s.waiting) continue;
      s.wait_s[s.category] += dt;
      if (s.reserved) s.reserved_s += dt;
      if (s.borrowing) s.borrowing_s += dt;
    }
  last_t_ = t;
}

void JobWaitLog::first_started(uint32_t job) {
  State& s = jobs_[job];
  if (s.pending_index >= 0 && size_t(s.pending_index) < last_.size() && last_[size_t(s.pending_index)].job.value == job)
    s.reason_before_start = last_[size_t(s.pending_index)].reason;
}

void JobWaitLog::observe(Time t, std::vector<PendingInfo>&& pending, const std::function<bool(uint32_t)>& borrowing) {
  for (State& s : jobs_) {
    s.waiting = false;
    s.pending_index = -1;
  }
  last_ = std::move(pending);
  for (size_t i = 0; i < last_.size(); ++i) {
    const uint32_t id = last_[i].job.value;
    if (id >= jobs_.size()) continue;
    State& s = jobs_[id];
    s.waiting = true;
    s.category = uint8_t(last_[i].category) < kWaitCategories ? uint8_t(last_[i].category) : 0;
    s.reserved = last_[i].reserved;
    s.borrowing = borrowing(id);
    s.pending_index = int32_t(i);
  }
  last_t_ = t;
}

void JobWaitLog::fill(uint32_t job, SimJobRecord& r) const {
  if (job >= jobs_.size()) return;
  const State& s = jobs_[job];
  r.wait_s = s.wait_s;
  r.reserved_s = s.reserved_s;
  r.borrowing_wait_s = s.borrowing_s;
  r.reason_before_start = s.reason_before_start;
}

namespace {
std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) {
    if (c == '"') q += '"';
    q += c == '\n' ? ' ' : c;
  }
  return q + "\"";
}
std::string num(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.0f", v);
  return b;
}
}  // namespace

void write_jobs_csv(std::ostream& out, const std::vector<SimReport>& reports) {
  out << "policy,job,team,arrival_s,gpus,work_s,first_start_s,finish_s,preemptions,reclaimed,by_las,by_priority,moved,"
         "run_s,spread_run_s,spread_slowdown,queued_s";
  for (size_t c = 0; c < kWaitCategories; ++c) out << ",wait_" << wait_category_name(WaitCategory(c)) << "_s";
  out << ",reserved_s,borrowing_wait_s,reason_before_start\n";
  for (const SimReport& r : reports)
    for (const SimJobRecord& j : r.jobs) {
      out << csv_field(r.metrics.policy) << ',' << csv_field(j.name) << ',' << csv_field(j.team) << ',' << j.arrival << ','
          << double(j.gpus_milli) / 1000.0 << ',' << j.work << ',' << (j.first_start >= 0 ? std::to_string(j.first_start) : "")
          << ',' << (j.finish >= 0 ? std::to_string(j.finish) : "") << ',' << j.preemptions << ',' << j.reclaimed << ',' << j.by_las << ',' << j.by_priority << ',' << j.moved << ','
          << num(j.run_s) << ',' << num(j.spread_run_s) << ',' << double(j.spread_slowdown_milli) / 1000.0 << ','
          << num(j.queued_s);
      for (double w : j.wait_s) out << ',' << num(w);
      out << ',' << num(j.reserved_s) << ',' << num(j.borrowing_wait_s) << ',' << csv_field(j.reason_before_start) << '\n';
    }
}

}  // namespace tessera::sim
