// Structure-aware fuzzing of the REST API (issue 19): a real server with agents, every route, with
// each role's token, a bogus one and none; paths, query strings, headers and bodies mutated from
// valid requests (fields of the wrong type, out of range, huge, deep, not UTF-8, bytes flipped).
// Asserts: the server never dies, never answers 5xx (but 503 from a log fetch, whose upstream is
// the node's agent), never hangs (every request answers within its timeout), and its resident memory
// stays bounded.
//
// Seeded and bounded for CI: TESSERA_FUZZ_REQUESTS (default 20000) and TESSERA_FUZZ_SEED (default
// 19). A longer run: TESSERA_FUZZ_REQUESTS=500000 build/tests/server_tests --gtest_filter='ApiFuzz.*'
// (docs/server.md, "Security").
#include <gtest/gtest.h>

#include <cstdlib>
#include <random>

#include "hostile_client.h"
#include "server_process.h"

namespace tessera::testing {
namespace {

int64_t env_int(const char* name, int64_t fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoll(v) : fallback;
}

class Fuzzer {
 public:
  explicit Fuzzer(uint64_t seed) : rng_(seed) {}

  size_t pick(size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(rng_); }
  bool chance(int percent) { return int(pick(100)) < percent; }
  template <class T>
  const T& one_of(const std::vector<T>& v) { return v[pick(v.size())]; }

  // A path segment, query value or header value: mostly plausible, often hostile.
  std::string atom() {
    static const std::vector<std::string> atoms = {
        "1", "2", "0", "-1", "42", "999999999999999999999", "1e300", "a100-0", "a100-1", "mig-0", "team-a", "team-b",
        "org", "default", "research", "true", "false", "", "%FF", "%C3%28", "%00", "%0A", "%0D%0A", "%2F", "..", "%2E%2E",
        "%E2%80%AE", "%F0%9F%98%80", "a%20b", "\xFF", "\xC3\x28", "x;y", "'", "\"", "<script>", "%", "%%", "%G1",
        "succeeded,failed", "pending", "running", "team,project", "user", "model", "csv", "json", "2026-11-01"};
    if (chance(10)) return std::string(1 + pick(5000), "abcé%\xFF"[pick(6)]);
    return one_of(atoms);
  }

  // A JSON value of a random type (for replacing a field).
  nlohmann::json value(int depth = 0) {
    switch (pick(depth > 3 ? 9 : 11)) {
      case 0: return nullptr;
      case 1: return bool(pick(2));
      case 2: return int64_t(pick(5)) - 2;
      case 3: return std::numeric_limits<int64_t>::max();
      case 4: return 1e300;
      case 5: return -0.5;
      case 6: return uint64_t(18446744073709551615ull);
      case 7: return std::string(pick(3) == 0 ? 100000 : 5, 'x');
      case 8: return "\u202e\n\t\u0000end";
      case 9: {
        nlohmann::json a = nlohmann::json::array();
        for (size_t i = pick(4); i > 0; --i) a.push_back(value(depth + 1));
        return a;
      }
      default: {
        nlohmann::json o = nlohmann::json::object();
        for (size_t i = pick(4); i > 0; --i) o[atom()] = value(depth + 1);
        return o;
      }
    }
  }

  // Mutates a valid JSON document: replaces, removes or adds fields at any depth.
  void mutate(nlohmann::json& j, int depth = 0) {
    if (j.is_object() && !j.empty()) {
      auto it = std::next(j.begin(), long(pick(j.size())));
      const int what = int(pick(4));
      if (what == 0) *it = value();
      else if (what == 1) j.erase(it);
      else if (what == 2 && depth < 6) mutate(*it, depth + 1);
      else j[atom()] = value();
    } else if (j.is_array() && !j.empty()) {
      auto& e = j[pick(j.size())];
      if (chance(50) && depth < 6) mutate(e, depth + 1);
      else e = value();
    } else {
      j = value();
    }
  }

  // Byte-level damage to a body.
  std::string damage(std::string s) {
    if (s.empty()) return "\xFF";
    switch (pick(5)) {
      case 0: s[pick(s.size())] = char(pick(256)); break;
      case 1: s.resize(pick(s.size())); break;
      case 2: s.insert(pick(s.size()), "\xC3\x28"); break;
      case 3: s = std::string(1 + pick(20000), "[{\"\\"[pick(4)]); break;
      default: s.insert(pick(s.size()), std::string(1 + pick(100), char(pick(32)))); break;
    }
    return s;
  }

 private:
  std::mt19937_64 rng_;
};

struct Route {
  std::string method, path;  // {id}, {node}, {op} are filled in
  std::string body_kind;     // "", job, register, heartbeat, watch, reason, interruption, token, priority
};

Json valid_body(const std::string& kind, Fuzzer& f, int64_t job_id) {
  Json gpus = Json::array(), stats = Json::array();
  for (int i = 0; i < 8; ++i) {
    gpus.push_back(Json{{"model", "A100-80GB"}, {"mig_enabled", false}});
    stats.push_back(Json{{"index", i}, {"utilization_pct", int(f.pick(101))}, {"memory_used_mib", 100}});
  }
  const std::string node = f.chance(50) ? "a100-0" : "a100-1";
  if (kind == "job")
    return Json{{"name", "fz"}, {"queue", f.chance(50) ? "team-a" : "team-b"}, {"resources", {{"gpus", int(f.pick(3))}, {"cpu", 1000}}},
                {"command", {"sleep", "1"}}, {"env", {{"A", "b"}}}, {"priority_class", "research"}, {"tasks", 1 + int(f.pick(2))}};
  if (kind == "register")
    return Json{{"node", node}, {"address", "127.0.0.1"}, {"log_port", 0}, {"log_secret", "s"}, {"version", "fz"},
                {"inventory", {{"gpus", gpus}, {"source", "fake"}}}, {"topology", {{"leaf", "leaf-0"}}}};
  if (kind == "heartbeat")
    return Json{{"node", node},
                {"tasks", {Json{{"job", job_id}, {"attempt", 1}, {"task", 0}, {"state", f.chance(80) ? "running" : "succeeded"},
                                {"exit_code", 0}, {"master_port", 29500}, {"checkpoint", "/ckpt/1"}}}},
                {"gpus", stats}, {"mig", Json::array()}};
  if (kind == "watch")  // a short wait, so that a held watch does not slow the run
    return Json{{"node", node}, {"seen", int64_t(f.pick(3))}, {"wait_ms", 100 + int64_t(f.pick(200))}};
  if (kind == "reason") return Json{{"reason", "fuzz"}};
  if (kind == "interruption") return Json{{"notice_s", 600}};
  if (kind == "token") return Json{{"user", "fz"}, {"role", f.chance(50) ? "viewer" : "member"}, {"queue", "team-a"}};
  if (kind == "priority") return Json{{"priority_class", "research"}};
  return Json::object();
}

TEST(ApiFuzz, NoRequestCrashesHangsOrFailsTheServer) {
  const int64_t requests = env_int("TESSERA_FUZZ_REQUESTS", 20000);
  const uint64_t seed = uint64_t(env_int("TESSERA_FUZZ_SEED", 19));
  ServerProcess server;
  server.with_agents({"--agent-timeout-ms", "600000"});
  ASSERT_TRUE(server.start());
  const std::vector<std::string> tokens = {server.admin_token(),
                                           server.token("fz-lead", "team-lead", "org"),
                                           server.token("fz-member", "member", "team-a"),
                                           server.token("fz-viewer", "viewer"),
                                           server.token("fz-agent", "agent"),
                                           "",
                                           "tsr_0000000000000000000000000000000000000000"};
  for (const std::string& t : tokens) ASSERT_TRUE(t.empty() || t.size() > 8);
  const std::vector<Route> routes = {
      {"GET", "/healthz", ""}, {"GET", "/readyz", ""}, {"GET", "/metrics", ""}, {"GET", "/", ""}, {"GET", "/jobs/{id}", ""},
      {"GET", "/api/v1/whoami", ""}, {"POST", "/api/v1/jobs", "job"}, {"GET", "/api/v1/jobs", ""},
      {"GET", "/api/v1/jobs/{id}", ""}, {"DELETE", "/api/v1/jobs/{id}", ""}, {"POST", "/api/v1/jobs/{id}/cancel", ""},
      {"POST", "/api/v1/jobs/{id}/priority", "priority"}, {"GET", "/api/v1/jobs/{id}/logs", ""},
      {"GET", "/api/v1/queues", ""}, {"GET", "/api/v1/nodes", ""}, {"POST", "/api/v1/nodes/{node}/{op}", "reason"},
      {"POST", "/api/v1/nodes/{node}/interruption", "interruption"}, {"POST", "/api/v1/tokens", "token"},
      {"GET", "/api/v1/tokens", ""}, {"GET", "/api/v1/events", ""}, {"POST", "/api/v1/admin/reload", ""},
      {"POST", "/api/v1/agent/register", "register"}, {"POST", "/api/v1/agent/heartbeat", "heartbeat"},
      {"POST", "/api/v1/agent/heartbeat", "heartbeat"}, {"POST", "/api/v1/agent/heartbeat", "heartbeat"},
      {"POST", "/api/v1/agent/watch", "watch"},
      {"GET", "/api/v1/reports/chargeback", ""}, {"GET", "/api/v1/reports/usage", ""}, {"GET", "/api/v1/utilisation", ""},
  };
  const std::vector<std::string> params = {"queue", "user", "state", "active", "limit", "after", "task", "offset",
                                           "from", "to", "by", "format", "minutes", "model", "x"};
  Fuzzer f(seed);
  httplib::Client cli("127.0.0.1", server.port());
  cli.set_read_timeout(15, 0);
  cli.set_write_timeout(15, 0);
  cli.set_keep_alive(true);
  cli.set_url_encode(false);
  // Register both nodes so heartbeats reach state.
  for (const char* n : {"a100-0", "a100-1"}) {
    Json reg = valid_body("register", f, 1);
    reg["node"] = n;
    ASSERT_EQ(server.post("/api/v1/agent/register", tokens[4], reg).status, 200);
  }
  const int64_t rss_start = rss_kib(server.pid());
  std::map<int, int64_t> by_status;
  int64_t max_job = 1;
  for (int64_t i = 0; i < requests; ++i) {
    const Route& route = f.one_of(routes);
    std::string path = route.path;
    auto fill = [&](const std::string& hole, const std::string& with) {
      if (auto at = path.find(hole); at != std::string::npos) path.replace(at, hole.size(), with);
    };
    const int64_t job_id = 1 + int64_t(f.pick(size_t(max_job)));
    fill("{id}", f.chance(70) ? std::to_string(job_id) : f.atom());
    fill("{node}", f.chance(60) ? (f.chance(50) ? "a100-0" : "mig-0") : f.atom());
    fill("{op}", f.one_of(std::vector<std::string>{"cordon", "drain", "resume"}));
    if (f.chance(40)) {
      path += "?";
      for (size_t k = 1 + f.pick(3); k > 0; --k) path += f.one_of(params) + "=" + f.atom() + "&";
    }
    // Bytes a client could not put in a request line break it: such requests are the raw path's job.
    const bool raw_path = path.find_first_of(std::string(" \r\n\0", 4)) != std::string::npos;
    httplib::Headers h;
    const std::string& token = f.one_of(tokens);
    if (!token.empty()) h.emplace("Authorization", f.chance(5) ? "Bearer " + token + "\xFF" : "Bearer " + token);
    if (f.chance(10)) h.emplace("Idempotency-Key", f.atom());
    std::string content_type = "application/json";
    std::string body;
    if (route.method == "POST") {
      Json b = valid_body(route.body_kind, f, job_id);
      for (size_t k = f.pick(3); k > 0; --k) f.mutate(b);
      body = b.dump(-1, ' ', false, Json::error_handler_t::replace);
      if (route.body_kind == "job" && f.chance(30)) {
        content_type = "application/yaml";
        body = "name: fz\nqueue: team-a\nresources: {gpus: 1}\ncommand: [sleep, '1']\n";
        if (f.chance(50)) body = std::string(1 + f.pick(50000), '[');
      }
      if (f.chance(15)) body = f.damage(body);
    }
    int status = 0;
    std::string answer;
    if (raw_path || f.chance(3)) {
      std::string extra;
      for (const auto& [k, v] : h) extra += k + ": " + v + "\r\n";
      RawReply r = raw_http(server.port(), raw_request(route.method, path, "", body, extra, content_type), 15);
      status = r.status;
      answer = r.body;
      if (status == 0) status = 400;  // a request line the server closed on: no answer is a fair one
    } else {
      httplib::Result r = route.method == "GET"      ? cli.Get(path.c_str(), h)
                          : route.method == "DELETE" ? cli.Delete(path.c_str(), h)
                                                     : cli.Post(path.c_str(), h, body, content_type.c_str());
      if (r) {
        status = r->status;
        answer = r->body;
      }
    }
    ++by_status[status];
    if (status == 201 && route.body_kind == "job") max_job += 1;
    ASSERT_NE(status, 0) << "request " << i << " got no answer (hang or crash): " << route.method << " " << path;
    const bool upstream = status == 503 && path.find("/logs") != std::string::npos;
    ASSERT_TRUE(status < 500 || upstream) << "request " << i << ": " << route.method << " " << path << " -> " << status << " "
                                          << answer.substr(0, 300) << "\nbody: " << body.substr(0, 300);
    if (i % 1000 == 0) {
      ASSERT_TRUE(process_alive(server.pid())) << "the server died by request " << i;
    }
  }
  ASSERT_TRUE(process_alive(server.pid()));
  EXPECT_EQ(server.get("/healthz", "").status, 200);
  const int64_t rss_end = rss_kib(server.pid());
  EXPECT_LT(rss_end, std::max<int64_t>(rss_start * 4, 400 * 1024)) << "RSS grew from " << rss_start << " to " << rss_end << " KiB";
  std::string summary;
  for (const auto& [st, n] : by_status) summary += " " + std::to_string(st) + ":" + std::to_string(n);
  std::cout << "fuzz: " << requests << " requests, seed " << seed << ", statuses" << summary << ", RSS " << rss_start << " -> "
            << rss_end << " KiB\n";
}

}  // namespace
}  // namespace tessera::testing
