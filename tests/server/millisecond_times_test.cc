// Millisecond times (docs/api.md, "Time"): events keep time_ms beside their second in the store,
// attempts (rebuilt from the events) have start_ms/end_ms, and jobs submitted_ms/started_ms/
// finished_ms. Checked: every _ms value / 1000 is its seconds field, an attempt starts before it
// ends, the event log's time_ms never goes back along seq, the values are the stored ones (the same
// after a controller restart), and a store of schema version 2 (events in seconds only) migrates:
// its rows read as seconds * 1000.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "server/controller.h"
#include "server/job_record.h"
#include "server/server_main.h"
#include "server/store.h"
#include "server_process.h"
#include "sqlite_query.h"

namespace tessera::server {
namespace {

namespace fs = std::filesystem;
using tessera::testing::sqlite_query;

// ---- the store ---------------------------------------------------------------------------------

class StoreMs : public ::testing::Test {
 protected:
  void SetUp() override { dir = tessera::testing::make_temp_dir("tessera-ms-store"); }
  void TearDown() override { fs::remove_all(dir); }
  std::string db() const { return dir + "/tessera.db"; }
  std::unique_ptr<Store> open() const {
    auto s = open_sqlite_store(dir);
    EXPECT_TRUE(s.ok()) << s.error().message;
    return s.ok() ? std::move(*s) : nullptr;
  }
  std::string dir;
};

EventRow ev(int64_t job, int64_t time, int64_t time_ms, std::string kind = "submitted") {
  EventRow e{0, job, time, std::move(kind), "alice", "{}"};
  e.time_ms = time_ms;
  return e;
}

TEST_F(StoreMs, EventsKeepTheirMillisecondsAndAnUnsetOneIsTheSecond) {
  {
    auto store = open();
    ASSERT_TRUE(store);
    WriteBatch b;
    b.events = {ev(1, 1700000000, 1700000000123), ev(1, 1700000001, -1, "started"), ev(0, 1700000002, 1700000002999, "denied")};
    ASSERT_TRUE(store->write_sync(b).ok());
  }
  auto store = open();  // read back from the file, not from memory
  ASSERT_TRUE(store);
  auto job = store->events_for_job(1);
  ASSERT_TRUE(job.ok()) << job.error().message;
  ASSERT_EQ(job->size(), 2u);
  EXPECT_EQ((*job)[0].time, 1700000000);
  EXPECT_EQ((*job)[0].time_ms, 1700000000123);
  EXPECT_EQ((*job)[1].time_ms, 1700000001000) << "-1 on write stores the second";
  auto all = store->events_after(0, 10);
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 3u);
  EXPECT_EQ((*all)[2].time_ms, 1700000002999);
  for (const EventRow& e : *all) EXPECT_EQ(e.time_ms / 1000, e.time) << e.kind;
}

// Schema version 2 as the release before millisecond events wrote it (frozen copy of migrations 1
// and 2 of sqlite_db.cc), with rows in it.
constexpr const char* kSchemaV2 = R"sql(
  CREATE TABLE jobs (id INTEGER PRIMARY KEY CHECK (id > 0), state TEXT NOT NULL, queue TEXT NOT NULL,
                     user TEXT NOT NULL, submitted INTEGER NOT NULL, record TEXT NOT NULL);
  CREATE INDEX jobs_state ON jobs(state);
  CREATE INDEX jobs_queue ON jobs(queue);
  CREATE INDEX jobs_user ON jobs(user);
  CREATE TABLE events (seq INTEGER PRIMARY KEY AUTOINCREMENT, job_id INTEGER NOT NULL, time INTEGER NOT NULL,
                       kind TEXT NOT NULL, actor TEXT NOT NULL, detail TEXT NOT NULL);
  CREATE INDEX events_job_id ON events(job_id);
  CREATE TABLE tokens (hash TEXT PRIMARY KEY CHECK (length(hash) > 0), user TEXT NOT NULL, role TEXT NOT NULL,
                       queue TEXT NOT NULL, created INTEGER NOT NULL, revoked INTEGER NOT NULL);
  CREATE TABLE meta ("key" TEXT PRIMARY KEY, "value" TEXT NOT NULL);
  ALTER TABLE tokens ADD COLUMN node TEXT NOT NULL DEFAULT '';
  PRAGMA journal_mode = WAL;
  INSERT INTO jobs VALUES (1, 'running', 'team-a', 'alice', 1700000000, '{"id":1}');
  INSERT INTO events (job_id, time, kind, actor, detail) VALUES
    (1, 1700000000, 'submitted', 'alice', '{}'),
    (1, 1700000003, 'started', 'scheduler', '{"attempt":1,"placement":[{"task":0,"node":"n-0"}]}'),
    (1, 1700000010, 'preempted', 'scheduler', '{"reason":"r"}'),
    (0, 1700000011, 'denied', 'eve', '{}');
  INSERT INTO tokens VALUES ('ab12', 'alice', 'member', 'team-a', 5, 0, '');
  INSERT INTO meta VALUES ('next_job_id', '2'), ('store/commits', '7');
  PRAGMA application_id = 1414746689;
  PRAGMA user_version = 2;
)sql";

TEST_F(StoreMs, AStoreOfSchemaVersion2MigratesAndItsEventsReadAsTheirSecondTimes1000) {
  ASSERT_GE(sqlite_schema_version(), 3);
  std::ofstream(db()).close();  // 0600 before SQLite writes it, as the store makes its files
  fs::permissions(db(), fs::perms::owner_read | fs::perms::owner_write);
  sqlite_query(db(), kSchemaV2);
  ASSERT_EQ(sqlite_query(db(), "PRAGMA user_version"), "2");
  ASSERT_EQ(sqlite_query(db(), "SELECT count(*) FROM events"), "4");
  {
    auto store = open();
    ASSERT_TRUE(store);
    EXPECT_EQ(sqlite_query(db(), "PRAGMA user_version"), std::to_string(sqlite_schema_version()));
    auto state = store->load();
    ASSERT_TRUE(state.ok()) << state.error().message;
    ASSERT_EQ(state->jobs.size(), 1u);
    EXPECT_EQ(state->jobs[0].record, R"({"id":1})");
    ASSERT_EQ(state->tokens.size(), 1u);
    EXPECT_EQ(state->tokens[0].user, "alice");
    EXPECT_EQ(state->last_event_seq, 4);
    auto old = store->events_after(0, 100);
    ASSERT_TRUE(old.ok()) << old.error().message;
    ASSERT_EQ(old->size(), 4u);
    for (const EventRow& e : *old) EXPECT_EQ(e.time_ms, e.time * 1000) << e.kind;
    // Its attempts read in milliseconds too.
    auto job = store->events_for_job(1);
    ASSERT_TRUE(job.ok());
    const Json attempts = attempts_json(*job);
    ASSERT_EQ(attempts.size(), 1u) << attempts.dump();
    EXPECT_EQ(attempts[0]["start_ms"], 1700000003000);
    EXPECT_EQ(attempts[0]["end_ms"], 1700000010000);
    EXPECT_EQ(attempts[0]["outcome"], "preempted");
    // New events have their own milliseconds, after the old ones.
    WriteBatch b;
    b.events = {ev(1, 1700000020, 1700000020456, "requeued")};
    ASSERT_TRUE(store->write_sync(b).ok());
  }
  // The migration changed the schema only: the old rows were not rewritten.
  EXPECT_EQ(sqlite_query(db(), "SELECT count(*) FROM events WHERE time_ms IS NULL"), "4");
  auto store = open();  // a second open of the migrated store: nothing more to do
  ASSERT_TRUE(store);
  auto all = store->events_after(0, 100);
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 5u);
  EXPECT_EQ((*all)[4].seq, 5);
  EXPECT_EQ((*all)[4].time_ms, 1700000020456);
  EXPECT_EQ((*all)[0].time_ms, 1700000000000);
}

// ---- attempts from events ----------------------------------------------------------------------

TEST(AttemptsJson, StartedOpensAnAttemptAndTheNextEndClosesIt) {
  std::vector<EventRow> events = {
      ev(1, 100, 100250),
      ev(1, 101, 101500, "started"),
      ev(1, 102, 102000, "checkpoint_requested"),
      ev(1, 103, 103700, "interrupted"),
      ev(1, 103, 103700, "requeued"),
      ev(1, 104, -1, "started"),  // -1: the second
      ev(1, 110, 110001, "started"),  // (a start without an end before it)
  };
  events[1].detail = R"({"attempt": 1, "placement": [{"task": 0, "node": "a"}, {"task": 1, "node": "b"}]})";
  events[3].detail = R"({"reason": "requeued by alice", "checkpointed": false})";
  const Json a = attempts_json(events);
  ASSERT_EQ(a.size(), 3u) << a.dump();
  EXPECT_EQ(a[0]["attempt"], 1);
  EXPECT_EQ(a[0]["nodes"], (Json{"a", "b"}));
  EXPECT_EQ(a[0]["start"], 101);
  EXPECT_EQ(a[0]["start_ms"], 101500);
  EXPECT_EQ(a[0]["end"], 103);
  EXPECT_EQ(a[0]["end_ms"], 103700);
  EXPECT_EQ(a[0]["outcome"], "interrupted");
  EXPECT_EQ(a[0]["reason"], "requeued by alice");
  EXPECT_EQ(a[1]["attempt"], 2) << "no attempt in its detail: its place";
  EXPECT_EQ(a[1]["start_ms"], 104000);
  EXPECT_EQ(a[1]["end_ms"], 110001) << "closed by the next start";
  EXPECT_TRUE(a[1]["outcome"].is_null());
  EXPECT_EQ(a[2]["start_ms"], 110001);
  EXPECT_TRUE(a[2]["end"].is_null());
  EXPECT_TRUE(a[2]["end_ms"].is_null());
  EXPECT_TRUE(attempts_json({}).empty());
}

// ---- through the controller, on the real clock ---------------------------------------------------

// A controller on the built-in cluster with the real clock (millisecond times as in production).
class ControllerMs : public ::testing::Test {
 protected:
  void SetUp() override {
    dir = tessera::testing::make_temp_dir("tessera-ms-ctl");
    start();
  }
  void TearDown() override {
    ctl.reset();
    store.reset();
    fs::remove_all(dir);
  }
  void start() {
    auto st = open_sqlite_store(dir);
    ASSERT_TRUE(st.ok()) << st.error().message;
    store = std::move(*st);
    auto cfg = load_server_config("");
    ASSERT_TRUE(cfg.ok()) << cfg.error().message;
    ControllerOptions opt;  // the real clock
    opt.cycle_interval_ms = 20;
    auto c = Controller::start(*cfg, store.get(), opt);
    ASSERT_TRUE(c.ok()) << c.error().message;
    ctl = std::move(*c);
  }
  void stop() {
    ctl.reset();
    store.reset();
  }
  int64_t submit(const std::string& json) {
    auto spec = config::parse_job_spec_json(json);
    EXPECT_TRUE(spec.ok()) << spec.error().message;
    if (!spec.ok()) return -1;
    auto r = ctl->submit(admin, *spec, "", nullptr);
    EXPECT_TRUE(r.ok()) << r.error().message;
    return r.ok() ? (*r)["id"].get<int64_t>() : -1;
  }
  Json job(int64_t id) {
    auto r = ctl->show_job(admin, id);
    EXPECT_TRUE(r.ok()) << r.error().message;
    return r.ok() ? *r : Json();
  }
  Status verb(int64_t id, JobVerb v) {
    auto r = ctl->job_verb(admin, config::JobRef{id, -1}, v);
    return r.ok() ? Status() : Status(r.error());
  }
  // Waits until job `id` runs attempt `attempt` and its started event is stored.
  bool running(int64_t id, int64_t attempt) {
    return tessera::testing::eventually([&] {
      const Json j = job(id);
      return j["state"] == "running" && j["attempt"] == attempt && j["attempts"].size() == size_t(attempt);
    });
  }
  // Waits until the job has ended and its last event is stored.
  bool ended(int64_t id, const std::string& state) {
    return tessera::testing::eventually([&] {
      const Json j = job(id);
      return j["state"] == state && !j["events"].empty() && j["events"].back()["kind"] != "started";
    });
  }

  const Principal admin{"admin", Role::kAdmin, "", ""};
  std::string dir;
  std::unique_ptr<Store> store;
  std::unique_ptr<Controller> ctl;
};

// A `_ms` field and its seconds: null together, else ms / 1000 == seconds.
void expect_same_moment(const Json& o, const std::string& s, const std::string& ms, const std::string& what) {
  ASSERT_TRUE(o.contains(s) && o.contains(ms)) << what << ": " << s << ", " << ms << " in " << o.dump();
  ASSERT_EQ(o[s].is_null(), o[ms].is_null()) << what << ": " << s << " and " << ms << " in " << o.dump();
  if (o[s].is_null()) return;
  EXPECT_EQ(o[ms].get<int64_t>() / 1000, o[s].get<int64_t>()) << what << ": " << ms << " in " << o.dump();
}

// An event log in seq order: seq increasing, time_ms / 1000 == time, time_ms never decreasing.
void expect_ordered_log(const Json& events, const std::string& what) {
  int64_t seq = 0, ms = 0;
  for (const Json& e : events) {
    expect_same_moment(e, "time", "time_ms", what + " event " + e.dump());
    EXPECT_GT(e["seq"].get<int64_t>(), seq) << what;
    EXPECT_GE(e["time_ms"].get<int64_t>(), ms) << what << ": time_ms went back at " << e.dump();
    seq = e["seq"].get<int64_t>();
    ms = e["time_ms"].get<int64_t>();
  }
}

// Everything a job's answer says about its times, checked against itself.
void expect_consistent_job(const Json& j) {
  const std::string what = "job " + j["ref"].get<std::string>();
  expect_same_moment(j, "submitted", "submitted_ms", what);
  expect_same_moment(j, "started", "started_ms", what);
  expect_same_moment(j, "finished", "finished_ms", what);
  expect_ordered_log(j["events"], what);
  ASSERT_FALSE(j["events"].empty()) << what;
  EXPECT_EQ(j["events"][0]["kind"], "submitted");
  EXPECT_EQ(j["events"][0]["time_ms"], j["submitted_ms"]) << what << ": the submitted event is the submission";
  const Json& attempts = j["attempts"];
  int64_t prev_end = j["submitted_ms"].get<int64_t>();
  for (size_t i = 0; i < attempts.size(); ++i) {
    const Json& a = attempts[i];
    const std::string at = what + " attempt " + std::to_string(i + 1);
    EXPECT_EQ(a["attempt"], int64_t(i + 1)) << at;
    expect_same_moment(a, "start", "start_ms", at);
    expect_same_moment(a, "end", "end_ms", at);
    EXPECT_GE(a["start_ms"].get<int64_t>(), prev_end) << at << " starts before the previous one ended";
    if (!a["end_ms"].is_null()) {
      EXPECT_LE(a["start_ms"].get<int64_t>(), a["end_ms"].get<int64_t>()) << at << ": " << a.dump();
      EXPECT_FALSE(a["outcome"].is_null()) << at;
      prev_end = a["end_ms"].get<int64_t>();
    } else {
      EXPECT_EQ(i + 1, attempts.size()) << at << ": only the last attempt may still run";
    }
  }
  if (!attempts.empty() && !j["started_ms"].is_null()) {
    EXPECT_EQ(j["started_ms"], attempts.back()["start_ms"]) << what << ": started_ms is the last attempt's start";
  }
  if (!j["finished_ms"].is_null()) {
    EXPECT_EQ(j["finished_ms"], j["events"].back()["time_ms"]) << what << ": finished_ms is its last event's";
  }
}

TEST_F(ControllerMs, JobAttemptAndEventTimesAgreeWithTheSecondsAreOrderedAndStored) {
  const int64_t a = submit(R"({"name": "a", "queue": "team-a", "resources": {"gpus": 8}, "command": ["x"]})");
  const int64_t b = submit(R"({"name": "b", "queue": "team-b", "resources": {"gpus": 4}, "command": ["x"]})");
  const int64_t held = submit(R"({"name": "h", "queue": "team-a", "resources": {"gpus": 1}, "command": ["x"], "hold": true})");
  ASSERT_TRUE(running(a, 1)) << job(a).dump();
  ASSERT_TRUE(running(b, 1)) << job(b).dump();
  // a: attempt 1 ends interrupted (requeue), attempt 2 runs and is cancelled.
  ASSERT_TRUE(verb(a, JobVerb::kRequeue).ok());
  ASSERT_TRUE(running(a, 2)) << job(a).dump();
  ASSERT_TRUE(verb(a, JobVerb::kCancel).ok());
  ASSERT_TRUE(verb(b, JobVerb::kCancel).ok());
  ASSERT_TRUE(verb(held, JobVerb::kCancel).ok());
  ASSERT_TRUE(ended(a, "cancelled")) << job(a).dump();
  ASSERT_TRUE(ended(b, "cancelled")) << job(b).dump();
  ASSERT_TRUE(ended(held, "cancelled")) << job(held).dump();

  Json before[3] = {job(a), job(b), job(held)};
  for (const Json& j : before) expect_consistent_job(j);
  const Json& ja = before[0];
  ASSERT_EQ(ja["attempts"].size(), 2u) << ja.dump();
  EXPECT_EQ(ja["attempts"][0]["outcome"], "interrupted");
  EXPECT_EQ(ja["attempts"][1]["outcome"], "cancelled");
  EXPECT_EQ(ja["attempts"][1]["end_ms"], ja["finished_ms"]) << "the job ended with its last attempt";
  EXPECT_FALSE(ja["attempts"][0]["nodes"].empty());
  ASSERT_EQ(before[1]["attempts"].size(), 1u);
  EXPECT_EQ(before[1]["attempts"][0]["end_ms"], before[1]["finished_ms"]);
  EXPECT_TRUE(before[2]["attempts"].empty()) << "never started";
  EXPECT_FALSE(before[2]["finished_ms"].is_null());

  // The whole log (GET /api/v1/events), and real milliseconds in it (the chance that every one of
  // its times falls on a whole second is 1e-3 per event).
  auto log = ctl->events(admin, 0, 10000);
  ASSERT_TRUE(log.ok()) << log.error().message;
  const Json& events = (*log)["events"];
  ASSERT_GE(events.size(), 10u);
  expect_ordered_log(events, "the log");
  bool sub_second = false;
  for (const Json& e : events) sub_second = sub_second || e["time_ms"].get<int64_t>() % 1000 != 0;
  EXPECT_TRUE(sub_second) << events.dump();

  // The times are the stored ones: the same after a restart.
  stop();
  start();
  for (int i = 0; i < 3; ++i) {
    const Json j = job(before[i]["id"].get<int64_t>());
    for (const char* k : {"submitted_ms", "started_ms", "finished_ms", "attempts", "events"})
      EXPECT_EQ(j[k], before[i][k]) << k << " of job " << before[i]["id"];
  }
}

TEST_F(ControllerMs, EventsAndJobsOfAStoreOfSchemaVersion2ReadAsSecondsTimes1000) {
  const int64_t a = submit(R"({"name": "a", "queue": "team-a", "resources": {"gpus": 8}, "command": ["x"]})");
  ASSERT_TRUE(running(a, 1)) << job(a).dump();
  ASSERT_TRUE(verb(a, JobVerb::kCancel).ok());
  ASSERT_TRUE(ended(a, "cancelled")) << job(a).dump();
  stop();
  // Back to what the previous release left: schema 2 (no time_ms column) and job records without
  // their _ms fields.
  const std::string db = dir + "/tessera.db";
  sqlite_query(db,
               "ALTER TABLE events DROP COLUMN time_ms; "
               "UPDATE jobs SET record = json_remove(record, '$.submitted_ms', '$.started_ms', '$.finished_ms'); "
               "PRAGMA user_version = 2;");
  ASSERT_EQ(sqlite_query(db, "PRAGMA user_version"), "2");
  ASSERT_EQ(sqlite_query(db, "SELECT count(*) FROM pragma_table_info('events') WHERE name = 'time_ms'"), "0");
  start();
  EXPECT_EQ(sqlite_query(db, "PRAGMA user_version"), std::to_string(sqlite_schema_version()));
  const Json j = job(a);
  expect_consistent_job(j);
  EXPECT_EQ(j["submitted_ms"], j["submitted"].get<int64_t>() * 1000);
  EXPECT_EQ(j["started_ms"], j["started"].get<int64_t>() * 1000);
  EXPECT_EQ(j["finished_ms"], j["finished"].get<int64_t>() * 1000);
  for (const Json& e : j["events"]) EXPECT_EQ(e["time_ms"], e["time"].get<int64_t>() * 1000) << e.dump();
  ASSERT_EQ(j["attempts"].size(), 1u);
  EXPECT_EQ(j["attempts"][0]["start_ms"], j["attempts"][0]["start"].get<int64_t>() * 1000);
  EXPECT_EQ(j["attempts"][0]["end_ms"], j["attempts"][0]["end"].get<int64_t>() * 1000);
  // After the migration, new events have their milliseconds, after the old ones in the log.
  const int64_t b = submit(R"({"name": "b", "queue": "team-a", "resources": {"gpus": 1}, "command": ["x"], "hold": true})");
  const Json jb = job(b);  // (a submission is answered once it is stored)
  expect_consistent_job(jb);
  auto log = ctl->events(admin, 0, 10000);
  ASSERT_TRUE(log.ok());
  expect_ordered_log((*log)["events"], "the migrated log");
  int64_t seen = 0;
  for (const Json& e : (*log)["events"])
    if (e["job"] == b && e["kind"] == "submitted") {
      ++seen;
      EXPECT_EQ(e["time_ms"], jb["submitted_ms"]);
    }
  EXPECT_EQ(seen, 1);
}

}  // namespace
}  // namespace tessera::server
