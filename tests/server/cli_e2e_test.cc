// End-to-end tests of the `tessera` CLI: the real binary run as a child process (stdout, stderr and
// exit status captured) against a real `tessera server` started by ServerProcess. Also the server's
// config handling (--check-config, reload on SIGHUP and POST /admin/reload) and backup/restore.
#include <gtest/gtest.h>

#include <fcntl.h>

#include <map>

#include "server_process.h"

namespace tessera::testing {
namespace {

std::string show(const CliResult& r) {
  return "exit " + std::to_string(r.status) + "\n--- stdout\n" + r.out + "--- stderr\n" + r.err;
}

void write_file(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::trunc);
  f << text;
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// The job id from "Submitted job N".
int64_t submitted_id(const CliResult& r) {
  const auto at = r.out.find("Submitted job ");
  if (at == std::string::npos) return -1;
  return std::stoll(r.out.substr(at + 14));
}

// The jobs of `tessera jobs --json` (an object with a "jobs" array, or the array itself).
Json jobs_of(const std::string& text) {
  const Json j = Json::parse(text, nullptr, false);
  if (j.is_array()) return j;
  if (j.is_object() && j.contains("jobs")) return j["jobs"];
  return Json::array();
}

Json find_job(const Json& jobs, int64_t id) {
  for (const auto& j : jobs)
    if (j.value("id", int64_t(-1)) == id) return j;
  return Json();
}

class CliE2E : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string out;
    ASSERT_TRUE(server.start(&out)) << out;
    url = "http://127.0.0.1:" + std::to_string(server.port());
    work = make_temp_dir("tessera-cli-work");
  }
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(work, ec);
  }
  // `tessera VERB --server URL --token ADMIN ARGS...`
  CliResult admin(const std::string& verb, std::vector<std::string> args = {}) {
    std::vector<std::string> all = {verb, "--server", url, "--token", server.admin_token()};
    all.insert(all.end(), args.begin(), args.end());
    return run_cli(all);
  }
  ServerProcess server;
  std::string url, work;
};

TEST_F(CliE2E, SubmitListShowCancelPriority) {
  // Submit with flags and a command.
  auto a = admin("submit", {"--gpus", "1", "--queue", "team-a", "--name", "x", "--", "sleep", "5"});
  ASSERT_EQ(a.status, 0) << show(a);
  const int64_t x = submitted_id(a);
  ASSERT_GT(x, 0) << show(a);

  // Submit a YAML spec file.
  const std::string spec = work + "/job.yaml";
  write_file(spec, "name: from-yaml\nqueue: team-b\nresources:\n  gpus: 2\ncommand: [sleep, \"60\"]\n");
  auto b = admin("submit", {spec});
  ASSERT_EQ(b.status, 0) << show(b);
  const int64_t y = submitted_id(b);
  ASSERT_GT(y, x) << show(b);

  // The table lists both names.
  auto table = admin("jobs");
  ASSERT_EQ(table.status, 0) << show(table);
  EXPECT_TRUE(contains(table.out, "from-yaml")) << show(table);
  EXPECT_TRUE(contains(table.out, " x ")) << show(table);
  EXPECT_TRUE(contains(table.out, "team-a")) << show(table);

  // --json parses, with both jobs and their fields.
  auto js = admin("jobs", {"--json"});
  ASSERT_EQ(js.status, 0) << show(js);
  ASSERT_FALSE(Json::parse(js.out, nullptr, false).is_discarded()) << show(js);
  const Json jobs = jobs_of(js.out);
  ASSERT_TRUE(find_job(jobs, x).is_object()) << js.out;
  ASSERT_TRUE(find_job(jobs, y).is_object()) << js.out;
  EXPECT_EQ(find_job(jobs, x)["name"], "x");
  EXPECT_EQ(find_job(jobs, x)["queue"], "team-a");
  EXPECT_EQ(find_job(jobs, y)["name"], "from-yaml");
  EXPECT_EQ(find_job(jobs, y)["queue"], "team-b");

  // show: the name and the state.
  auto s = admin("show", {std::to_string(y)});
  ASSERT_EQ(s.status, 0) << show(s);
  EXPECT_TRUE(contains(s.out, "from-yaml")) << show(s);
  // The scheduler may start it meanwhile (the cluster is empty).
  EXPECT_TRUE(contains(s.out, "pending") || contains(s.out, "running")) << show(s);

  // priority: team-a allows preemptible.
  auto p = admin("priority", {std::to_string(x), "preemptible"});
  ASSERT_EQ(p.status, 0) << show(p);
  EXPECT_TRUE(contains(p.out, "preemptible")) << show(p);
  auto sx = server.get("/api/v1/jobs/" + std::to_string(x), server.admin_token());
  EXPECT_EQ(sx.body["priority_class"], "preemptible") << sx.raw;

  // cancel, then the job is cancelled in `jobs --all --json` (the server cancels at once; the
  // loop only tolerates a slow answer).
  auto c = admin("cancel", {std::to_string(y)});
  ASSERT_EQ(c.status, 0) << show(c);
  EXPECT_TRUE(contains(c.out, std::to_string(y))) << show(c);
  std::string final_state;
  for (int i = 0; i < 100; ++i) {
    auto all = admin("jobs", {"--all", "--json"});
    ASSERT_EQ(all.status, 0) << show(all);
    const Json j = find_job(jobs_of(all.out), y);
    ASSERT_TRUE(j.is_object()) << all.out;
    final_state = j["state"].get<std::string>();
    if (final_state == "cancelled") break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(final_state, "cancelled");
}

TEST_F(CliE2E, QueuesNodesWhoami) {
  auto q = admin("queues");
  ASSERT_EQ(q.status, 0) << show(q);
  for (const char* name : {"org", "team-a", "team-b", "default"}) EXPECT_TRUE(contains(q.out, name)) << name << "\n" << show(q);
  auto n = admin("nodes");
  ASSERT_EQ(n.status, 0) << show(n);
  // A node entry with count 1 keeps its bare name ("mig"); count > 1 adds -0, -1, ...
  for (const char* name : {"a100-0", "a100-1", "mig"}) EXPECT_TRUE(contains(n.out, name)) << name << "\n" << show(n);
  auto w = admin("whoami");
  ASSERT_EQ(w.status, 0) << show(w);
  EXPECT_TRUE(contains(w.out, "admin")) << show(w);
}

TEST_F(CliE2E, BadSpecNamesTheField) {
  auto r = admin("submit", {"--gpus", "-1", "--queue", "team-a", "--", "sleep", "5"});
  EXPECT_NE(r.status, 0) << show(r);
  EXPECT_TRUE(contains(r.err, "gpus")) << show(r);
  // Nothing was submitted.
  auto list = server.get("/api/v1/jobs", server.admin_token());
  ASSERT_EQ(list.status, 200) << list.raw;
  EXPECT_TRUE(jobs_of(list.raw).empty()) << list.raw;
}

TEST_F(CliE2E, NoServerNamesTheAddress) {
  // A port nobody listens on: the server's, after it stopped.
  const std::string addr = "127.0.0.1:" + std::to_string(server.port());
  server.kill(SIGKILL);
  auto r = run_cli({"jobs", "--server", "http://" + addr, "--token", "tsr_x", "--timeout", "5"});
  EXPECT_NE(r.status, 0) << show(r);
  EXPECT_TRUE(contains(r.err, addr)) << show(r);
}

TEST_F(CliE2E, SecondServerOnTheSamePortIsRefused) {
  // Before the fix the second server bound too (SO_REUSEPORT) and took half the connections.
  const std::string dir = make_temp_dir("tessera-cli-second");
  auto r = run_cli({"server", "--data", dir, "--listen", "127.0.0.1:" + std::to_string(server.port()), "--config",
                    TESSERA_SOURCE_DIR "/tests/server/data/e2e_cluster.yaml", "--log-level", "warn"},
                   {}, 10);
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  EXPECT_EQ(r.status, 1) << show(r);
  EXPECT_TRUE(contains(r.err, "cannot bind")) << show(r);
  // The first still answers every request.
  for (int i = 0; i < 20; ++i) ASSERT_EQ(server.get("/api/v1/whoami", server.admin_token()).status, 200);
}

TEST_F(CliE2E, SecondServerOnTheSameDataDirectoryIsRefused) {
  auto r = run_cli({"server", "--data", server.dir(), "--listen", "127.0.0.1:0", "--config",
                    TESSERA_SOURCE_DIR "/tests/server/data/e2e_cluster.yaml", "--log-level", "warn"},
                   {}, 10);
  EXPECT_EQ(r.status, 1) << show(r);
  EXPECT_TRUE(contains(r.err, "in use by another tessera server")) << show(r);
  for (int i = 0; i < 5; ++i) ASSERT_EQ(server.get("/api/v1/whoami", server.admin_token()).status, 200);
}

TEST_F(CliE2E, TokenFromFileAndEnvironment) {
  auto f = run_cli({"whoami", "--server", url, "--token-file", server.dir() + "/admin.token"});
  ASSERT_EQ(f.status, 0) << show(f);
  EXPECT_TRUE(contains(f.out, "admin")) << show(f);
  auto e = run_cli({"jobs"}, {{"TESSERA_SERVER", url}, {"TESSERA_TOKEN", server.admin_token()}});
  EXPECT_EQ(e.status, 0) << show(e);
  // Without any token the server refuses.
  auto none = run_cli({"jobs", "--server", url});
  EXPECT_NE(none.status, 0) << show(none);
  EXPECT_TRUE(contains(none.err, "401")) << show(none);
}

TEST_F(CliE2E, ViewerTokenReadsButCannotCancel) {
  auto sub = admin("submit", {"--gpus", "1", "--queue", "team-a", "--name", "victim", "--", "sleep", "60"});
  ASSERT_EQ(sub.status, 0) << show(sub);
  const int64_t id = submitted_id(sub);
  auto t = run_cli({"token", "create", "--user", "u", "--role", "viewer", "--server", url, "--token", server.admin_token()});
  ASSERT_EQ(t.status, 0) << show(t);
  std::string token = t.out;
  while (!token.empty() && (token.back() == '\n' || token.back() == ' ')) token.pop_back();
  ASSERT_EQ(token.rfind("tsr_", 0), 0u) << show(t);

  auto list = run_cli({"jobs", "--server", url, "--token", token});
  ASSERT_EQ(list.status, 0) << show(list);
  EXPECT_TRUE(contains(list.out, "victim")) << show(list);
  auto who = run_cli({"whoami", "--server", url, "--token", token});
  ASSERT_EQ(who.status, 0) << show(who);
  EXPECT_TRUE(contains(who.out, "viewer")) << show(who);

  auto c = run_cli({"cancel", std::to_string(id), "--server", url, "--token", token});
  EXPECT_NE(c.status, 0) << show(c);
  EXPECT_TRUE(contains(c.err, "403")) << show(c);
  auto j = server.get("/api/v1/jobs/" + std::to_string(id), server.admin_token());
  ASSERT_EQ(j.status, 200) << j.raw;
  EXPECT_NE(j.body["state"], "cancelled") << j.raw;
}

TEST_F(CliE2E, CordonShowsReasonThenResume) {
  auto c = admin("cordon", {"a100-1", "--reason", "replacing a DIMM"});
  ASSERT_EQ(c.status, 0) << show(c);
  auto n = admin("nodes");
  ASSERT_EQ(n.status, 0) << show(n);
  std::string line;
  {
    std::istringstream in(n.out);
    for (std::string l; std::getline(in, l);)
      if (l.rfind("a100-1", 0) == 0) line = l;
  }
  EXPECT_TRUE(contains(line, "cordoned")) << show(n);
  EXPECT_TRUE(contains(line, "replacing a DIMM")) << show(n);
  // Without a reason cordon is refused before asking the server.
  auto bad = admin("cordon", {"a100-0"});
  EXPECT_NE(bad.status, 0) << show(bad);
  EXPECT_TRUE(contains(bad.err, "--reason")) << show(bad);

  auto r = admin("resume", {"a100-1"});
  ASSERT_EQ(r.status, 0) << show(r);
  auto nodes = server.get("/api/v1/nodes", server.admin_token());
  ASSERT_EQ(nodes.status, 200);
  for (const auto& node : nodes.body["nodes"]) EXPECT_EQ(node["state"], "ready") << node.dump();
}

// ---- config ----

const std::string kGoodConfig = read_file(TESSERA_SOURCE_DIR "/tests/server/data/e2e_cluster.yaml");

TEST(CliConfig, CheckConfigGoodAndBad) {
  auto good = run_cli({"server", "--check-config", "--config", TESSERA_SOURCE_DIR "/tests/server/data/e2e_cluster.yaml"});
  EXPECT_EQ(good.status, 0) << show(good);
  EXPECT_TRUE(contains(good.out, "config ok")) << show(good);

  const std::string dir = make_temp_dir("tessera-cli-config");
  const std::string parent = dir + "/parent.yaml";
  write_file(parent, kGoodConfig + "  - {name: team-x, parent: nosuchqueue}\n");
  auto p = run_cli({"server", "--check-config", "--config", parent});
  EXPECT_EQ(p.status, 1) << show(p);
  EXPECT_TRUE(contains(p.err, "nosuchqueue")) << show(p);
  EXPECT_TRUE(contains(p.err, "parent")) << show(p);

  const std::string key = dir + "/key.yaml";
  write_file(key, kGoodConfig + "bogus_key: 1\n");
  auto k = run_cli({"server", "--check-config", "--config", key});
  EXPECT_EQ(k.status, 1) << show(k);
  EXPECT_TRUE(contains(k.err, "bogus_key")) << show(k);
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
}

TEST(CliConfig, ReloadRefusesBadConfigThenAddsQueue) {
  const std::string dir = make_temp_dir("tessera-cli-reload");
  const std::string cfg = dir + "/cluster.yaml";
  write_file(cfg, kGoodConfig);
  ServerProcess server(cfg);
  std::string out;
  ASSERT_TRUE(server.start(&out)) << out;

  // A bad file: SIGHUP keeps the old config and the server keeps answering.
  write_file(cfg, kGoodConfig + "bogus_key: 1\n");
  server.kill(SIGHUP);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  auto h = server.get("/healthz", "");
  EXPECT_EQ(h.status, 200) << h.raw;
  auto r = server.post("/api/v1/admin/reload", server.admin_token(), Json::object());
  EXPECT_EQ(r.status, 400) << r.raw;
  EXPECT_TRUE(contains(r.raw, "old config stays")) << r.raw;
  EXPECT_TRUE(contains(r.raw, "bogus_key")) << r.raw;
  auto q = server.get("/api/v1/queues", server.admin_token());
  ASSERT_EQ(q.status, 200);
  EXPECT_FALSE(contains(q.raw, "team-c"));

  // A good file with a new top-level leaf queue (org's guarantee is already shared out).
  write_file(cfg, kGoodConfig + "  - {name: team-c}\n");
  r = server.post("/api/v1/admin/reload", server.admin_token(), Json::object());
  ASSERT_EQ(r.status, 200) << r.raw;
  q = server.get("/api/v1/queues", server.admin_token());
  ASSERT_EQ(q.status, 200);
  bool found = false;
  for (const auto& queue : q.body["queues"]) found = found || queue["name"] == "team-c";
  EXPECT_TRUE(found) << q.raw;
  auto sub = server.post("/api/v1/jobs", server.admin_token(), job("in-c", "team-c"));
  EXPECT_EQ(sub.status, 201) << sub.raw;
  EXPECT_EQ(sub.body["queue"], "team-c") << sub.raw;

  // The CLI's reload works too, and the CLI sees and submits to the new queue.
  const std::string url = "http://127.0.0.1:" + std::to_string(server.port());
  auto cli = run_cli({"admin", "reload", "--server", url, "--token", server.admin_token()});
  EXPECT_EQ(cli.status, 0) << show(cli);
  auto queues = run_cli({"queues", "--server", url, "--token", server.admin_token()});
  EXPECT_EQ(queues.status, 0) << show(queues);
  EXPECT_TRUE(contains(queues.out, "team-c")) << show(queues);
  auto csub = run_cli({"submit", "--server", url, "--token", server.admin_token(), "--gpus", "1", "--queue", "team-c", "--",
                       "sleep", "5"});
  EXPECT_EQ(csub.status, 0) << show(csub);

  // A good file on SIGHUP is taken (the reload runs on the server's signal thread: poll).
  write_file(cfg, kGoodConfig + "  - {name: team-c}\n  - {name: team-d}\n");
  server.kill(SIGHUP);
  bool has_d = false;
  for (int i = 0; i < 100 && !has_d; ++i) {
    has_d = contains(server.get("/api/v1/queues", server.admin_token()).raw, "\"team-d\"");
    if (!has_d) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_TRUE(has_d);
  server.kill(SIGKILL);
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
}

// ---- backup and restore ----

TEST(CliBackup, BackupStopRestoreStart) {
  ServerProcess server;
  std::string out;
  ASSERT_TRUE(server.start(&out)) << out;
  const std::string url = "http://127.0.0.1:" + std::to_string(server.port());
  const std::string work = make_temp_dir("tessera-cli-backup");
  std::vector<int64_t> ids;
  for (const char* q : {"team-a", "team-b", "default"}) {
    auto r = run_cli({"submit", "--server", url, "--token-file", server.dir() + "/admin.token", "--gpus", "1", "--queue", q,
                      "--name", std::string("job-") + q, "--", "sleep", "60"});
    ASSERT_EQ(r.status, 0) << show(r);
    ids.push_back(submitted_id(r));
  }
  const std::string file = work + "/backup.db";
  auto b = run_cli({"admin", "backup", file, "--server", url, "--token", server.admin_token()});
  ASSERT_EQ(b.status, 0) << show(b);
  ASSERT_TRUE(std::filesystem::exists(file));
  // A second backup to the same file needs --force.
  auto again = run_cli({"admin", "backup", file, "--server", url, "--token", server.admin_token()});
  EXPECT_NE(again.status, 0) << show(again);

  // A clean stop on SIGTERM.
  const int st = server.kill(SIGTERM);
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << "wait status " << st;

  const std::string fresh = work + "/restored";
  auto r = run_cli({"admin", "restore", file, "--data", fresh});
  ASSERT_EQ(r.status, 0) << show(r);

  // Restoring over an existing store without --force is refused; with --force it is done.
  auto over = run_cli({"admin", "restore", file, "--data", fresh});
  EXPECT_NE(over.status, 0) << show(over);
  EXPECT_FALSE(over.err.empty()) << show(over);
  auto forced = run_cli({"admin", "restore", file, "--data", fresh, "--force"});
  EXPECT_EQ(forced.status, 0) << show(forced);

  ServerProcess restored(TESSERA_SOURCE_DIR "/tests/server/data/e2e_cluster.yaml", fresh);
  ASSERT_TRUE(restored.start(&out)) << out;
  // The store's tokens came along: the old admin token works on the restored server.
  auto list = restored.get("/api/v1/jobs", server.admin_token());
  ASSERT_EQ(list.status, 200) << list.raw;
  const Json jobs = jobs_of(list.raw);
  for (size_t i = 0; i < ids.size(); ++i) {
    const Json j = find_job(jobs, ids[i]);
    ASSERT_TRUE(j.is_object()) << ids[i] << " missing: " << list.raw;
    EXPECT_EQ(j["name"], std::string("job-") + (i == 0 ? "team-a" : i == 1 ? "team-b" : "default"));
  }
  EXPECT_EQ(jobs.size(), ids.size()) << list.raw;
  restored.kill(SIGKILL);
  std::error_code ec;
  std::filesystem::remove_all(work, ec);  // `restored` removes `fresh` (under work) too; either order is fine
}

}  // namespace
}  // namespace tessera::testing
