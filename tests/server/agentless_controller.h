// A test fixture: an agentless controller in-process on a cluster file, with a fixed clock and a
// real SQLite store in a temp dir; helpers to submit, read jobs, wait for starts and speak for agents.
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <memory>
#include <string>

#include "server/controller.h"
#include "server/server_main.h"
#include "server_process.h"

namespace tessera::testing {

using server::Controller;
using server::ControllerOptions;
using server::Principal;
using server::Role;
using server::Store;

class AgentlessController : public ::testing::Test {
 protected:
  void start(const std::string& cluster_file) {
    dir = make_temp_dir("tessera-ctl");
    open(cluster_file);
  }
  // Stops the controller and starts a new one on the same store (a controller restart).
  void restart(const std::string& cluster_file) {
    ctl.reset();
    store.reset();
    open(cluster_file);
  }
  // Opens the store in `dir` and starts the controller on it.
  void open(const std::string& cluster_file) {
    auto st = server::open_sqlite_store(dir);
    ASSERT_TRUE(st.ok()) << st.error().message;
    store = std::move(*st);
    auto cfg = server::load_server_config(cluster_file);
    ASSERT_TRUE(cfg.ok()) << cfg.error().message;
    ControllerOptions opt;
    opt.clock = [this] { return now.load(); };
    opt.cycle_interval_ms = 20;
    auto c = Controller::start(*cfg, store.get(), opt);
    ASSERT_TRUE(c.ok()) << c.error().message;
    ctl = std::move(*c);
  }
  void TearDown() override {
    ctl.reset();
    store.reset();
    if (!dir.empty()) std::filesystem::remove_all(dir);
  }
  int64_t submit_json(const std::string& json) {
    auto spec = config::parse_job_spec_json(json);
    EXPECT_TRUE(spec.ok()) << spec.error().message;
    if (!spec.ok()) return -1;
    auto r = ctl->submit(admin, *spec, "", nullptr);
    EXPECT_TRUE(r.ok());
    return r.ok() ? (*r)["id"].get<int64_t>() : -1;
  }
  Json job(int64_t id) {
    auto r = ctl->show_job(admin, id);
    EXPECT_TRUE(r.ok());
    return r.ok() ? *r : Json();
  }
  // Cycles until the job runs (a new attempt when `after_attempt` > 0); returns its first node.
  std::string wait_running(int64_t id, int64_t after_attempt = 0) {
    for (int i = 0; i < 50; ++i) {
      const Json j = job(id);
      if (j["state"] == "running" && j["attempt"].get<int64_t>() > after_attempt) return j["placement"][0]["node"];
      ctl->wait_for_cycle();
    }
    ADD_FAILURE() << "job " << id << " did not start: " << job(id).dump();
    return "";
  }
  Json heartbeat(const std::string& node, Json tasks) {
    auto r = ctl->agent_heartbeat(admin, Json{{"node", node}, {"tasks", tasks}});
    EXPECT_TRUE(r.ok()) << r.error().message;
    return r.ok() ? *r : Json();
  }
  Json node(const std::string& name) {
    auto r = ctl->nodes(admin);
    for (const Json& n : (*r)["nodes"])
      if (n["name"] == name) return n;
    return Json();
  }
  static Json event_of(const Json& job, const std::string& kind) {
    for (const Json& e : job.value("events", Json::array()))
      if (e.value("kind", "") == kind) return e;
    return Json();
  }
  static bool has_event(const Json& job, const std::string& kind) { return !event_of(job, kind).is_null(); }

  const Principal admin{"admin", Role::kAdmin, "", ""};
  std::atomic<int64_t> now{1'000'000};
  std::string dir;
  std::unique_ptr<Store> store;
  std::unique_ptr<Controller> ctl;
};

}  // namespace tessera::testing
