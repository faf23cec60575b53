// SchedulerTest: a hand-built cluster (n nodes of H100s), a queue tree, jobs pending or running
// (placed first fit), and one scheduling cycle over them. Shared by the scheduler's unit tests.
#pragma once

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "core/sched/scheduler.h"
#include "test_cluster.h"

namespace tessera {

using namespace tessera::testing;

constexpr Time kNow = 100000;

class SchedulerTest : public ::testing::Test {
 protected:
  // n nodes of `gpus` H100s each.
  void make_cluster(int nodes, int gpus) {
    cluster = ClusterState();
    for (int i = 0; i < nodes; ++i) ASSERT_TRUE(cluster.add_node(node_spec("n" + std::to_string(i), "H100-80GB-SXM", gpus)).ok());
  }
  void make_queues(std::vector<QueueSpec> specs) {
    auto t = QueueTree::build(specs);
    ASSERT_TRUE(t.ok()) << t.error().message;
    tree = std::move(t.value());
  }
  QueueId q(const std::string& name) const { return tree.find(name).value(); }

  Job& pending(int id, const std::string& queue, const std::string& cls, int tasks, int gpus, Time submitted = 0,
               const std::string& user = "u") {
    Job j;
    j.id = JobId(uint32_t(id));
    j.name = "job-" + std::to_string(id);
    j.user = user;
    j.queue = q(queue);
    j.priority_class = cls;
    j.gang = gang(tasks, whole(gpus), id);
    j.submitted = submitted;
    jobs.push_back(j);
    return jobs.back();
  }
  // A running job: placed first fit on the cluster now.
  Job& running(int id, const std::string& queue, const std::string& cls, int tasks, int gpus, Time started,
               const std::string& user = "u") {
    Job& j = pending(id, queue, cls, tasks, gpus, started, user);
    j.state = JobState::kRunning;
    j.started = started;
    FirstFitPolicy ff;
    PlacementEngine e(ff, {});
    auto r = e.place_and_commit(cluster, j.gang);
    EXPECT_EQ(r.outcome, Outcome::kPlaced) << r.reason;
    j.placement = r.tasks;
    return j;
  }
  Snapshot snapshot() const {
    Snapshot snap;
    snap.cluster = &cluster;
    snap.queues = &tree;
    snap.jobs = jobs;
    snap.reservation = reservation;
    return snap;
  }
  Decisions cycle(Time now = kNow) {
    auto s = Scheduler::create(config);
    EXPECT_TRUE(s.ok());
    return s.value()->cycle(snapshot(), now);
  }
  static std::vector<uint32_t> started(const Decisions& d) {
    std::vector<uint32_t> v;
    for (auto& s : d.start) v.push_back(s.job.value);
    return v;
  }
  static std::set<uint32_t> victims(const Decisions& d) {
    std::set<uint32_t> v;
    for (auto& p : d.preempt) v.insert(p.victim.value);
    return v;
  }
  static const PendingInfo* info(const Decisions& d, int id) {
    for (auto& p : d.pending)
      if (p.job.value == uint32_t(id)) return &p;
    return nullptr;
  }

  ClusterState cluster;
  QueueTree tree;
  std::vector<Job> jobs;
  SchedulerConfig config;
  std::optional<HeldReservation> reservation;  // passed in the snapshot
};

}  // namespace tessera
