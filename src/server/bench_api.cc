#include "server/bench_api.h"

#include <httplib.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <mutex>
#include <random>
#include <thread>

#include "server/bench_stats.h"
#include "server/controller.h"
#include "server/http_api.h"
#include "server/server_main.h"
#include "server/store.h"

namespace tessera::server {

namespace {

using bench::Clock;
using bench::ms_since;
using bench::percentile;

std::string job_body(int64_t i) {
  const char* queues[] = {"default", "team-a", "team-b"};
  return Json{{"name", "bench-" + std::to_string(i)}, {"queue", queues[i % 3]}, {"resources", {{"gpus", 1}, {"cpu", 4}, {"memory", "16Gi"}}},
              {"command", {"python3", "train.py", "--step", std::to_string(i)}}, {"expected_runtime", 3600}}
      .dump();
}

}  // namespace

Result<BenchApiResult> run_bench_api(const BenchApiOptions& o, const std::function<void(const std::string&)>& progress) {
  auto say = [&](const std::string& s) {
    if (progress) progress(s);
  };
  std::string dir = o.data_dir;  // a directory, sqlite:DIR or postgres://... (StoreLocation)
  bool temp = false;
  if (dir.empty()) {
    char tmpl[] = "/tmp/tessera-bench-api-XXXXXX";
    if (!mkdtemp(tmpl)) return internal_error("bench api: cannot create a temporary directory in /tmp");
    dir = tmpl;
    temp = true;
  }
  BenchApiResult out;
  {
    auto where = parse_store_location(dir);
    if (!where.ok()) return where.error();
    auto store = open_store(*where);
    if (!store.ok()) return store.error();
    auto cfg = load_server_config("");
    if (!cfg.ok()) return cfg.error();
    auto controller = Controller::start(*cfg, store->get(), ControllerOptions{});
    if (!controller.ok()) return controller.error();
    const std::string token = new_token();
    if (Status st = (*store)->write_sync(WriteBatch{{}, {}, {TokenRow{sha256_hex(token), "bench", "admin", "", 0, false, ""}}, {}}); !st.ok())
      return st.error();
    (*controller)->tokens().add(TokenRow{sha256_hex(token), "bench", "admin", "", 0, false, ""});
    HttpApi api(**controller, [](const std::string&) { return Status(); });
    HttpOptions http;
    http.port = 0;
    http.threads = std::max(8, o.clients + 8);
    if (Status st = api.start(http); !st.ok()) return st.error();
    const int port = api.port();
    const httplib::Headers auth = {{"Authorization", "Bearer " + token}};

    // 1. Durable submissions.
    say("submitting for " + std::to_string(o.seconds) + " s with " + std::to_string(o.clients) + " clients");
    std::atomic<int64_t> next{0}, failed{0};
    std::mutex why_mu;
    std::string why;  // the first failure
    auto note_failure = [&](const httplib::Result& res) {
      ++failed;
      std::lock_guard l(why_mu);
      if (why.empty()) why = res ? "HTTP " + std::to_string(res->status) + ": " + res->body : "no answer: " + httplib::to_string(res.error());
    };
    std::vector<std::vector<double>> lat(size_t(o.clients));
    const auto t0 = Clock::now();
    const auto until = t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(o.seconds));
    std::vector<std::thread> threads;
    for (int c = 0; c < o.clients; ++c) {
      threads.emplace_back([&, c] {
        httplib::Client cli("127.0.0.1", port);
        cli.set_keep_alive(true);
        cli.set_tcp_nodelay(true);
        cli.set_read_timeout(60, 0);
        while (Clock::now() < until) {
          const int64_t i = next++;
          const auto s = Clock::now();
          auto res = cli.Post("/api/v1/jobs", auth, job_body(i), "application/json");
          if (!res || res->status != 201) {
            note_failure(res);
            continue;
          }
          lat[size_t(c)].push_back(ms_since(s));
        }
      });
    }
    for (auto& t : threads) t.join();
    out.submit_seconds = ms_since(t0) / 1000.0;
    std::vector<double> all;
    for (auto& v : lat) all.insert(all.end(), v.begin(), v.end());
    out.submitted = int64_t(all.size());
    out.submissions_per_s = double(out.submitted) / out.submit_seconds;
    out.submit_ms_p50 = percentile(all, 0.5);
    out.submit_ms_p99 = percentile(all, 0.99);
    if (failed > 0)
      return internal_error("bench api: " + std::to_string(failed.load()) + " submissions failed; the first: " + why +
                            " (p50 " + std::to_string(out.submit_ms_p50) + " ms, p99 " + std::to_string(out.submit_ms_p99) +
                            " ms, max " + std::to_string(percentile(all, 1.0)) + " ms, " + std::to_string(out.submitted) + " ok)");
    out.store_batches = (*store)->stats().batches;
    out.store_transactions = (*store)->stats().transactions;

    // 2. Listing over `list_jobs` jobs.
    if (out.submitted < o.list_jobs) {
      say("topping up to " + std::to_string(o.list_jobs) + " jobs");
      std::atomic<int64_t> made{out.submitted};
      threads.clear();
      for (int c = 0; c < o.clients; ++c) {
        threads.emplace_back([&] {
          httplib::Client cli("127.0.0.1", port);
          cli.set_keep_alive(true);
        cli.set_tcp_nodelay(true);
          cli.set_read_timeout(60, 0);
          for (int64_t i = made++; i < o.list_jobs; i = made++) {
            auto res = cli.Post("/api/v1/jobs", auth, job_body(i), "application/json");
            if (!res || res->status != 201) note_failure(res);
          }
        });
      }
      for (auto& t : threads) t.join();
      if (failed > 0) return internal_error("bench api: " + std::to_string(failed.load()) + " submissions failed while topping up; the first: " + why);
    }
    (*controller)->wait_for_cycle();
    out.jobs_listed_over = std::max(o.list_jobs, out.submitted);
    say("listing over " + std::to_string(out.jobs_listed_over) + " jobs");
    httplib::Client cli("127.0.0.1", port);
    cli.set_keep_alive(true);
        cli.set_tcp_nodelay(true);
    std::mt19937_64 rng(7);
    std::vector<double> page, filtered;
    for (int i = 0; i < o.list_requests; ++i) {
      const int64_t after = int64_t(rng() % uint64_t(out.jobs_listed_over));
      auto s = Clock::now();
      auto res = cli.Get(("/api/v1/jobs?limit=100&after=" + std::to_string(after)).c_str(), auth);
      if (!res || res->status != 200) return internal_error("bench api: listing failed");
      page.push_back(ms_since(s));
      s = Clock::now();
      res = cli.Get(("/api/v1/jobs?state=pending&queue=team-a&limit=100&after=" + std::to_string(after)).c_str(), auth);
      if (!res || res->status != 200) return internal_error("bench api: filtered listing failed");
      filtered.push_back(ms_since(s));
    }
    out.list_page_ms_p50 = percentile(page, 0.5);
    out.list_page_ms_p99 = percentile(page, 0.99);
    out.list_filtered_ms_p50 = percentile(filtered, 0.5);
    out.list_filtered_ms_p99 = percentile(filtered, 0.99);
    const auto walk = Clock::now();
    int64_t after = 0, seen = 0;
    for (;;) {
      auto res = cli.Get(("/api/v1/jobs?limit=1000&after=" + std::to_string(after)).c_str(), auth);
      if (!res || res->status != 200) return internal_error("bench api: listing failed during the walk");
      Json j = Json::parse(res->body);
      seen += int64_t(j["jobs"].size());
      if (j["next_after"].is_null()) break;
      after = j["next_after"];
    }
    out.list_all_s = ms_since(walk) / 1000.0;
    if (seen != out.jobs_listed_over)
      return internal_error("bench api: the walk saw " + std::to_string(seen) + " jobs, expected " + std::to_string(out.jobs_listed_over));
    api.stop();
  }
  if (temp) {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
  return out;
}

}  // namespace tessera::server
