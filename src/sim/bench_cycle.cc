#include "sim/bench_cycle.h"

#include <algorithm>
#include <chrono>
#include <ctime>
#include <vector>

#include "core/cluster.h"
#include "core/placement/engine.h"
#include "core/rng.h"
#include "core/sched/apply.h"
#include "core/sched/scheduler.h"
#include "sim/bench_place.h"

namespace tessera::sim {

Result<BenchCycleResult> run_bench_cycle(const BenchCycleOptions& o, const std::function<void(int, int)>& progress) {
  if (o.nodes < 1) return invalid_argument("--nodes: must be >= 1");
  if (o.gpus_per_node < 1 || o.gpus_per_node > 16) return invalid_argument("--gpus-per-node: must be in 1..16");
  if (o.pending < 0) return invalid_argument("--pending: must be >= 0");
  if (o.queues < 1) return invalid_argument("--queues: must be >= 1");
  if (o.cycles < 1) return invalid_argument("--cycles: must be >= 1");

  auto built = make_bench_cluster(o.nodes, o.gpus_per_node, 32, 16, false);
  if (!built.ok()) return built.error();
  ClusterState& cluster = *built;
  // Queues: orgs -> teams; each team is guaranteed a slice of half the cluster, limited to 4x that.
  const int orgs = std::max(1, o.queues / 50);
  const int64_t total_milli = cluster.total_gpus() * 1000;
  const int64_t team_share = total_milli / 2 / o.queues / 1000 * 1000;
  std::vector<QueueSpec> specs;
  for (int g = 0; g < orgs; ++g) {
    QueueSpec org;
    org.name = "org-" + std::to_string(g);
    org.guaranteed["any"] = team_share * ((o.queues + orgs - 1) / orgs);
    specs.push_back(org);
  }
  for (int q = 0; q < o.queues; ++q) {
    QueueSpec team;
    team.name = "team-" + std::to_string(q);
    team.parent = "org-" + std::to_string(q % orgs);
    team.guaranteed["any"] = team_share;
    team.limit["any"] = team_share * 4 + 8000;
    team.weight = 1 + q % 3;
    specs.push_back(team);
  }
  auto tree = QueueTree::build(specs);
  if (!tree.ok()) return tree.error();

  SchedulerConfig cfg;
  cfg.max_scored_nodes = o.score_nodes;
  cfg.seed = o.seed;
  for (const char* m : {"A100-80GB", "H100-80GB-SXM"}) cfg.gpu_class[m] = "any";
  auto sched = Scheduler::create(cfg);
  if (!sched.ok()) return sched.error();

  Rng rng(o.seed);
  const char* classes[] = {"preemptible", "research", "research", "production-training", "production-inference"};
  auto make_job = [&](uint32_t id, Time submitted) {
    Job j;
    j.id = JobId(id);
    j.name = "job-" + std::to_string(id);
    j.user = "user-" + std::to_string(rng.uniform(5000));
    const uint32_t leaf = uint32_t(rng.uniform(uint64_t(o.queues)));
    j.queue = *tree->find("team-" + std::to_string(leaf));
    j.priority_class = classes[rng.uniform(5)];
    j.submitted = submitted;
    j.expected_runtime = 600 + Duration(rng.uniform(36000));
    const uint64_t k = rng.uniform(100);
    Gang& g = j.gang;
    g.id = j.id;
    g.task.cpu = MilliCpu(4000);
    g.task.memory = MiB(32768);
    if (k < 40) g.task.gpu_count = 1;
    else if (k < 70) g.task.gpu_count = 1, g.task.milli_per_gpu = MilliGpu(250);
    else if (k < 90) g.task.gpu_count = 4;
    else if (k < 98) g.task.gpu_count = 8;
    else g.tasks = 4, g.task.gpu_count = 8, g.topology = {TopologyMode::kPreferred, "leaf"};
    j.checkpoint.interval = k % 2 ? 1800 : 0;
    return j;
  };

  // Running jobs on about half the GPUs, placed by the engine as earlier cycles would have.
  auto policy = make_policy(cfg.policy);
  if (!policy.ok()) return policy.error();
  EngineOptions eo;
  eo.max_scored_nodes = o.score_nodes;
  PlacementEngine engine(**policy, eo);
  std::vector<Job> jobs;
  uint32_t next_id = 0;
  while (cluster.allocated_gpu_milli() < total_milli / 2) {
    Job j = make_job(next_id++, 0);
    PlacementResult r = engine.place_and_commit(cluster, j.gang);
    if (r.outcome != Outcome::kPlaced) continue;
    j.state = JobState::kRunning;
    j.started = Time(rng.uniform(3600));
    j.placement = std::move(r.tasks);
    jobs.push_back(std::move(j));
  }
  BenchCycleResult res;
  res.running_before = int64_t(jobs.size());
  for (int i = 0; i < o.pending; ++i) jobs.push_back(make_job(next_id++, 3600 + i / 100));

  Snapshot snap;
  snap.cluster = &cluster;
  snap.queues = &*tree;
  snap.jobs = std::move(jobs);
  snap.history.assign(tree->size(), QueueLoad{});
  auto percentiles = [](std::vector<double> v, double& p50, double& p99, double& max) {
    std::sort(v.begin(), v.end());
    auto pct = [&](double p) { return v[std::min(v.size() - 1, size_t(p * double(v.size() - 1) + 0.5))]; };
    p50 = pct(0.5);
    p99 = pct(0.99);
    max = v.back();
  };
  auto cpu_ms = [] {  // this thread's CPU time
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return double(ts.tv_sec) * 1e3 + double(ts.tv_nsec) / 1e6;
  };
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0.0 : v[v.size() / 2];
  };
  std::vector<double> ms, cpu;
  int64_t decisions = 0;
  double seconds = 0;
  const Time now0 = 7200;
  Decisions first;
  const int steps = o.cycles * 2;
  for (int c = 0; c < o.cycles; ++c) {
    const auto t0 = std::chrono::steady_clock::now();
    const double c0 = cpu_ms();
    Decisions d = (*sched)->cycle(snap, now0);
    cpu.push_back(cpu_ms() - c0);
    const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    ms.push_back(dt * 1000);
    seconds += dt;
    decisions += int64_t(d.start.size() + d.preempt.size() + d.pending.size());
    if (c == 0) {
      res.starts = int64_t(d.start.size());
      res.preemptions = int64_t(d.preempt.size());
      res.pending = int64_t(d.pending.size());
      for (const PendingInfo& p : d.pending) {
        res.reserved += p.reserved ? 1 : 0;
        res.backfill_held += p.category == WaitCategory::kReservation ? 1 : 0;
      }
      first = std::move(d);
    }
    if (progress) progress(c + 1, steps);
  }
  percentiles(ms, res.cycle_ms_p50, res.cycle_ms_p99, res.cycle_ms_max);
  res.cycle_cpu_ms_p50 = median(cpu);
  cpu.clear();
  res.decisions_per_s = seconds > 0 ? double(decisions) / seconds : 0;

  // After a small change: apply the first cycle, then per step end some running jobs, add arrivals,
  // let time pass, and time the next cycle (applied in turn, its reservation passed back).
  std::vector<int64_t> index;  // job id -> position in snap.jobs
  auto reindex = [&] {
    index.assign(next_id + size_t(o.cycles) * size_t(std::max(0, o.small_arrivals)) + 1, -1);
    for (size_t i = 0; i < snap.jobs.size(); ++i) index[snap.jobs[i].id.value] = int64_t(i);
  };
  reindex();
  const JobLookup lookup = [&](JobId id) -> Job* {
    return id.value < index.size() && index[id.value] >= 0 ? &snap.jobs[size_t(index[id.value])] : nullptr;
  };
  Time now = now0;
  apply_decisions(first, cluster, lookup, now);
  snap.reservation = first.reservation;
  ms.clear();
  for (int c = 0; c < o.cycles; ++c) {
    now += o.small_step;
    std::vector<size_t> running;
    for (size_t i = 0; i < snap.jobs.size(); ++i)
      if (snap.jobs[i].state == JobState::kRunning) running.push_back(i);
    for (int f = 0; f < o.small_finishes && !running.empty(); ++f) {
      const size_t k = size_t(rng.uniform(running.size()));
      end_job(snap.jobs[running[k]], cluster, JobState::kSucceeded);
      running[k] = running.back();
      running.pop_back();
    }
    std::erase_if(snap.jobs, [](const Job& j) {
      return j.state != JobState::kPending && j.state != JobState::kRunning && j.state != JobState::kCheckpointing;
    });
    for (int a = 0; a < o.small_arrivals; ++a) snap.jobs.push_back(make_job(next_id++, now));
    reindex();
    const auto t0 = std::chrono::steady_clock::now();
    const double c0 = cpu_ms();
    Decisions d = (*sched)->cycle(snap, now);
    cpu.push_back(cpu_ms() - c0);
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    res.small_starts += int64_t(d.start.size());
    res.small_preemptions += int64_t(d.preempt.size());
    res.small_pending = int64_t(d.pending.size());
    apply_decisions(d, cluster, lookup, now);
    snap.reservation = d.reservation;
    if (progress) progress(o.cycles + c + 1, steps);
  }
  percentiles(ms, res.small_ms_p50, res.small_ms_p99, res.small_ms_max);
  res.small_cpu_ms_p50 = median(cpu);
  return res;
}

}  // namespace tessera::sim
