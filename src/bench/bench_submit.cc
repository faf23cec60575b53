// The submission engine of `tessera bench cluster` (bench_internal.h).
#include <mutex>
#include <set>
#include <thread>

#include "bench/bench_internal.h"

namespace tessera::bench {

SubmitOutcome run_submissions(const SubmitControl& c, const std::function<std::optional<Submission>(int64_t)>& next) {
  SubmitOutcome out;
  std::mutex mu;  // guards out
  std::atomic<int64_t> index{0};
  Clock::time_point first = Clock::time_point::max(), last{};
  std::vector<std::thread> threads;
  for (int k = 0; k < c.clients; ++k) {
    threads.emplace_back([&] {
      RestClient cli(c.port, c.token);
      std::vector<SubmitRecord> mine;
      int64_t sent_here = 0, errors = 0;
      std::string first_error;
      Clock::time_point my_first = Clock::time_point::max(), my_last{};
      while (!c.stop->load()) {
        const int64_t i = index.fetch_add(1);
        std::optional<Submission> s = next(i);
        if (!s) break;
        const auto due = c.start + std::chrono::microseconds(int64_t(s->due_s * 1e6));
        if (due >= c.deadline) break;
        while (Clock::now() < due && !c.stop->load())
          std::this_thread::sleep_for(std::min<Clock::duration>(due - Clock::now(), std::chrono::milliseconds(50)));
        if (c.stop->load() || Clock::now() >= c.deadline) break;
        const auto sent = Clock::now();
        my_first = std::min(my_first, sent);
        ++sent_here;
        RestReply r = cli.post("/api/v1/jobs", s->body);
        const auto acked_at = Clock::now();
        if (r.status == 201 && r.body.is_object() && r.body.contains("id")) {
          const int64_t id = r.body["id"].get<int64_t>();
          const int64_t after = c.outstanding_gpus->fetch_add(s->gpus) + s->gpus;
          mine.push_back(SubmitRecord{id, i, sent, std::chrono::duration<double, std::milli>(acked_at - sent).count(),
                                      after <= c.capacity_gpus});
          my_last = acked_at;
          c.acked->fetch_add(1);
          if (c.on_acked) c.on_acked(id);
        } else {
          ++errors;
          if (first_error.empty())
            first_error = r.status ? "HTTP " + std::to_string(r.status) + ": " + r.raw.substr(0, 300) : r.error;
          if (r.status == 0) std::this_thread::sleep_for(std::chrono::milliseconds(100));
        }
      }
      std::lock_guard<std::mutex> g(mu);
      out.records.insert(out.records.end(), mine.begin(), mine.end());
      out.submitted += sent_here;
      out.errors += errors;
      if (out.first_error.empty()) out.first_error = first_error;
      first = std::min(first, my_first);
      last = std::max(last, my_last);
    });
  }
  for (auto& t : threads) t.join();
  if (first != Clock::time_point::max() && last > first) out.seconds = std::chrono::duration<double>(last - first).count();
  return out;
}

int64_t active_jobs(RestClient& admin) {
  RestReply r = admin.get("/api/v1/jobs?active=true&limit=1");
  if (r.status != 200 || !r.body.is_object()) return -1;
  return r.body.value("total", int64_t(-1));
}

ServerScan scan_server(RestClient& admin) {
  ServerScan s;
  int64_t after = 0;
  for (;;) {  // every job, in pages of 1000
    RestReply r = admin.get("/api/v1/jobs?limit=1000&after=" + std::to_string(after));
    if (r.status != 200 || !r.body.is_object()) {
      s.error = "GET /api/v1/jobs: " + (r.status ? "HTTP " + std::to_string(r.status) : r.error);
      break;
    }
    for (const auto& j : r.body["jobs"]) {
      ++s.jobs;
      const std::string st = j.value("state", "");
      if (st == "succeeded") ++s.succeeded;
      else if (st == "failed") {
        ++s.failed;
        if (j.value("name", "").rfind("fail-", 0) != 0) ++s.unexpected_failures;
      } else if (st == "cancelled") ++s.cancelled;
      else if (st == "pending" || st == "running" || st == "checkpointing") ++s.active;
      else ++s.other;
      if (j.value("attempt", int64_t(0)) > 1) ++s.restarted;
    }
    if (!r.body.contains("next_after") || r.body["next_after"].is_null()) break;
    after = r.body["next_after"].get<int64_t>();
  }
  std::set<std::string> not_ready;
  std::set<int64_t> lost;
  int64_t seq = 0;
  for (;;) {  // the event log, in pages of 10,000
    RestReply r = admin.get("/api/v1/events?limit=10000&after=" + std::to_string(seq));
    if (r.status != 200 || !r.body.is_object()) {
      if (s.error.empty()) s.error = "GET /api/v1/events: " + (r.status ? "HTTP " + std::to_string(r.status) : r.error);
      break;
    }
    const auto& ev = r.body["events"];
    if (!ev.is_array() || ev.empty()) break;
    for (const auto& e : ev) {
      seq = std::max(seq, e.value("seq", int64_t(0)));
      const std::string kind = e.value("kind", "");
      if (kind == "node_not_ready" && e.contains("detail") && e["detail"].is_object())
        not_ready.insert(e["detail"].value("node", ""));
      if (kind == "lost") lost.insert(e.value("job", int64_t(0)));
    }
  }
  s.nodes_not_ready_ever = int64_t(not_ready.size());
  s.jobs_lost = int64_t(lost.size());
  RestReply n = admin.get("/api/v1/nodes");
  if (n.status == 200 && n.body.is_object())
    for (const auto& x : n.body["nodes"]) s.not_ready_now += x.value("agent", "") == "not-ready";
  return s;
}

}  // namespace tessera::bench
