// Scheduler::cycle against Scheduler::cycle_reference (the same cycle with every shortcut that skips
// work off) on random event sequences: arrivals (1 GPU, shares, whole nodes, gangs with topology,
// MIG slices; five priority classes), finishes, checkpoints completed, node loss and return, with
// each cycle's decisions applied (core/sched/apply.h) and its reservation passed back. Every
// decision and every pending job's reason, category, positions and estimate must be the same.
#include <gtest/gtest.h>

#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include "core/rng.h"
#include "core/sched/apply.h"
#include "core/sched/scheduler.h"
#include "test_cluster.h"

namespace tessera {
namespace {

using namespace tessera::testing;

std::string text(const std::vector<TaskPlacement>& ps) {
  std::ostringstream o;
  for (const TaskPlacement& p : ps) {
    o << "[n" << p.node.value << " c" << p.cpu.v << " m" << p.memory.v;
    for (const GpuGrant& g : p.gpus)
      o << " g" << g.gpu << "k" << int(g.kind) << "x" << g.milli.v << "p" << g.mig_profile << "s" << int(g.mig_start)
        << (g.mig_create ? "+" : "") << "-" << g.mig_destroy;
    o << "]";
  }
  return o.str();
}

// Every field of the decisions, one line each.
std::string text(const Decisions& d) {
  std::ostringstream o;
  for (const StartDecision& s : d.start) o << "start " << s.job.value << " " << text(s.placement) << "\n";
  for (const PreemptDecision& p : d.preempt)
    o << "preempt " << p.victim.value << " for " << p.for_job.value << " phase " << int(p.phase) << " by " << p.evict_by
      << " '" << p.reason << "' move " << text(p.move_to) << "\n";
  for (const MigReconfigDecision& m : d.reconfigure_mig) {
    o << "mig n" << m.gpu.node.value << " g" << m.gpu.index << " " << m.enable_mig << " ready " << m.ready_at << " '"
      << m.reason << "'";
    for (const MigInstance& i : m.layout) o << " " << i.profile_id << "@" << int(i.start) << "/" << int(i.size);
    o << "\n";
  }
  for (const PendingInfo& p : d.pending)
    o << "pending " << p.job.value << " " << wait_category_name(p.category) << " q" << p.queue_position << " o"
      << p.overall_position << " est " << (p.estimated_start ? *p.estimated_start : -1) << " r" << p.reserved << " s"
      << p.short_of_room << " a" << p.awaits_move << " '" << p.reason << "'\n";
  if (d.reservation) {
    o << "reservation " << d.reservation->job.value << " at " << d.reservation->start << " promised "
      << d.reservation->promised << " ahead";
    for (JobId a : d.reservation->ahead) o << " " << a.value;
    o << "\n";
  }
  return o.str();
}

struct World {
  ClusterState cluster{GpuCatalog::builtin(), NetworkLevels({"spine", "leaf"})};
  QueueTree tree;
  std::vector<Job> jobs;
  uint32_t next_id = 1;
};

const char* kClasses[] = {"preemptible", "research", "research", "production-training", "production-inference"};

Job random_job(World& w, Rng& rng, Time now) {
  Job j;
  j.id = JobId(w.next_id++);
  j.name = "job-" + std::to_string(j.id.value);
  j.user = "u" + std::to_string(rng.uniform(6));
  j.queue = *w.tree.find("team-" + std::to_string(rng.uniform(6)));
  j.priority_class = kClasses[rng.uniform(5)];
  j.submitted = now - Time(rng.uniform(600));
  j.expected_runtime = rng.uniform(4) ? 300 + Duration(rng.uniform(7200)) : 0;
  j.attained_gpu_s = int64_t(rng.uniform(50000));
  const uint64_t k = rng.uniform(100);
  Gang& g = j.gang;
  g.id = j.id;
  g.task = whole(1, 2000, 8192);
  if (k < 30) {
  } else if (k < 50) {
    g.task = share(250 * (1 + int64_t(rng.uniform(3))), 1000, 4096);
  } else if (k < 65) {
    g.task = whole(4, 8000, 32768);
  } else if (k < 78) {
    g.task = whole(8, 16000, 65536);
  } else if (k < 90) {
    g.tasks = 2 + int(rng.uniform(3));
    g.task = whole(int(1 + rng.uniform(2)) * 4, 8000, 32768);
    const uint64_t t = rng.uniform(3);
    if (t == 0) g.topology = {TopologyMode::kRequired, "leaf"};
    else if (t == 1) g.topology = {TopologyMode::kPreferred, "leaf"};
  } else if (k < 95) {
    g.task = mig(rng.uniform(2) ? "1g.10gb" : "3g.40gb");
    g.task.gpu_models = {"A100-80GB"};
  } else {
    g.task = whole(2, 4000, 16384);
    g.task.gpu_models = {"H100-80GB-SXM"};
  }
  if (rng.uniform(2)) {
    j.checkpoint.interval = 1800;
    j.checkpoint.save_cost = 30 + Duration(rng.uniform(120));
  }
  return j;
}

// What was compared.
struct Compared {
  int64_t cycles = 0, starts = 0, preemptions = 0, moves = 0, mig = 0, pending = 0, reservations = 0;
};

// One random world and config; `steps` cycles, each after random events; cycle() and
// cycle_reference() compared every cycle.
Compared run_seed(uint64_t seed, int steps) {
  Rng rng(seed);
  World w;
  const int nodes = 16 + int(rng.uniform(17));
  for (int i = 0; i < nodes; ++i) {
    NodeSpec s = node_spec("n" + std::to_string(i), i % 3 == 2 ? "A100-80GB" : "H100-80GB-SXM", 8,
                           {"spine-" + std::to_string(i / 8), "leaf-" + std::to_string(i / 4)}, 128000, 1024 * 1024);
    if (i % 3 == 2 && i % 2 == 0)
      for (int g = 0; g < 4; ++g) s.mig_gpus.push_back(g);
    EXPECT_TRUE(w.cluster.add_node(std::move(s)).ok());
  }
  std::vector<QueueSpec> specs;
  for (int g = 0; g < 2; ++g) {
    QueueSpec org;
    org.name = "org-" + std::to_string(g);
    org.guaranteed["any"] = int64_t(nodes) * 8000 / 3;
    org.guaranteed["H100"] = 8000;
    specs.push_back(org);
  }
  for (int q = 0; q < 6; ++q) {
    QueueSpec team;
    team.name = "team-" + std::to_string(q);
    team.parent = "org-" + std::to_string(q % 2);
    team.guaranteed["any"] = int64_t(nodes) * 8000 / 10 * int64_t(rng.uniform(2));
    if (q % 3 == 1) team.guaranteed["H100"] = 8000;
    if (rng.uniform(3) == 0) team.limit["any"] = int64_t(nodes) * 8000 / 3;
    team.weight = 1 + q % 3;
    specs.push_back(team);
  }
  auto tree = QueueTree::build(specs);
  EXPECT_TRUE(tree.ok()) << tree.error().message;
  w.tree = std::move(*tree);

  const std::vector<std::string> presets = scheduler_preset_names();
  SchedulerConfig cfg = *scheduler_preset(seed % 4 == 3 ? presets[1 + rng.uniform(presets.size() - 1)] : "tessera");
  cfg.seed = seed;
  cfg.gpu_class["H100-80GB-SXM"] = "H100";
  cfg.in_queue_las = rng.uniform(4) == 0;
  cfg.victims_least_attained = rng.uniform(3) == 0;
  cfg.max_preemptions_per_cycle = 1 + int(rng.uniform(8));
  cfg.max_victim_searches_per_cycle = 1 + int(rng.uniform(16));
  cfg.topology_wait = rng.uniform(2) ? 600 : 0;
  auto sched = Scheduler::create(cfg);
  EXPECT_TRUE(sched.ok());

  Time now = 10000;
  // Running jobs placed by the engine, as earlier cycles would have.
  {
    auto policy = make_policy(cfg.policy);
    PlacementEngine engine(**policy, {});
    for (int i = 0; i < nodes * 3; ++i) {
      Job j = random_job(w, rng, now - 3600);
      PlacementResult r = engine.place_and_commit(w.cluster, j.gang);
      if (r.outcome != Outcome::kPlaced) continue;
      j.state = JobState::kRunning;
      j.started = now - Time(rng.uniform(3600));
      j.placement = r.tasks;
      w.jobs.push_back(std::move(j));
    }
  }
  const JobLookup lookup = [&](JobId id) -> Job* {
    for (Job& j : w.jobs)
      if (j.id == id) return &j;
    return nullptr;
  };
  std::vector<uint32_t> down;
  std::optional<HeldReservation> held;
  VacateOptions saved, lost;
  saved.checkpointed = true;
  lost.drop_move = true;
  Compared compared;
  for (int step = 0; step < steps; ++step) {
    now += 30 + Time(rng.uniform(300));
    // Finishes, checkpoints completed.
    for (Job& j : w.jobs) {
      if (j.state == JobState::kRunning && rng.uniform(8) == 0) end_job(j, w.cluster, JobState::kSucceeded);
      else if (j.state == JobState::kCheckpointing && rng.uniform(2) == 0)
        vacate(j, w.cluster, now, saved);
    }
    // A node lost (its jobs back to pending) or one returned.
    if (rng.uniform(3) == 0) {
      const uint32_t n = uint32_t(rng.uniform(uint64_t(nodes)));
      if (w.cluster.node(NodeId(n)).schedulable) {
        for (Job& j : w.jobs) {
          bool on = false;
          for (const TaskPlacement& p : j.placement) on = on || p.node.value == n;
          if (on && (j.state == JobState::kRunning || j.state == JobState::kCheckpointing))
            vacate(j, w.cluster, now, lost);
        }
        EXPECT_TRUE(w.cluster.set_schedulable(NodeId(n), false).ok());
        down.push_back(n);
      }
    }
    if (!down.empty() && rng.uniform(3) == 0) {
      EXPECT_TRUE(w.cluster.set_schedulable(NodeId(down.back()), true).ok());
      down.pop_back();
    }
    std::erase_if(w.jobs, [](const Job& j) {
      return j.state != JobState::kPending && j.state != JobState::kRunning && j.state != JobState::kCheckpointing;
    });
    const int arrivals = int(rng.uniform(uint64_t(nodes) * 2));
    for (int a = 0; a < arrivals; ++a) w.jobs.push_back(random_job(w, rng, now));

    Snapshot snap;
    snap.cluster = &w.cluster;
    snap.queues = &w.tree;
    snap.jobs = w.jobs;
    snap.history.assign(w.tree.size(), QueueLoad{});
    for (size_t q = 0; q < snap.history.size(); ++q) snap.history[q].decayed_usage = int64_t(rng.uniform(1000000));
    snap.reservation = held;
    const Decisions d = (*sched)->cycle(snap, now);
    const Decisions ref = (*sched)->cycle_reference(snap, now);
    const std::string a = text(d), b = text(ref);
    EXPECT_EQ(a, b) << "seed " << seed << " step " << step;
    if (a != b) return compared;
    ++compared.cycles;
    compared.starts += int64_t(d.start.size());
    compared.preemptions += int64_t(d.preempt.size());
    for (const PreemptDecision& p : d.preempt) compared.moves += p.move_to.empty() ? 0 : 1;
    compared.mig += int64_t(d.reconfigure_mig.size());
    compared.pending += int64_t(d.pending.size());
    compared.reservations += d.reservation ? 1 : 0;
    held = d.reservation;
    apply_decisions(d, w.cluster, lookup, now);
  }
  return compared;
}

TEST(CycleEquivalence, ShortcutsDecideAsTheFullCycleOnRandomEvents) {
  Compared all;
  for (uint64_t seed = 1; seed <= 120; ++seed) {
    const Compared c = run_seed(seed, 12);
    all.cycles += c.cycles, all.starts += c.starts, all.preemptions += c.preemptions, all.moves += c.moves;
    all.mig += c.mig, all.pending += c.pending, all.reservations += c.reservations;
    if (::testing::Test::HasFailure()) break;
  }
  std::printf("compared %lld cycles: %lld starts, %lld preemptions (%lld moves), %lld MIG changes, %lld pending "
              "verdicts, %lld reservations\n",
              (long long)all.cycles, (long long)all.starts, (long long)all.preemptions, (long long)all.moves,
              (long long)all.mig, (long long)all.pending, (long long)all.reservations);
  // The sequences reach every kind of decision (so that each is compared).
  EXPECT_EQ(all.cycles, 120 * 12);
  EXPECT_GT(all.starts, 1000);
  EXPECT_GT(all.preemptions, 100);
  EXPECT_GT(all.pending, 10000);
  EXPECT_GT(all.reservations, 100);
}

}  // namespace
}  // namespace tessera
