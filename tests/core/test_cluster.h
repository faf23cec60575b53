// Helpers for core tests: hand-built clusters and a trivial policy.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/cluster.h"
#include "core/placement/policy.h"

namespace tessera::testing {

// Scores every node 0 and picks GPUs with the default pickers: the engine's tie-break (rank, id)
// then decides, i.e. first fit in node order.
class FirstFitPolicy : public ScoringPolicy {
 public:
  std::string_view name() const override { return "test-first-fit"; }
  std::optional<NodeChoice> score(const Node& n, const TaskRequest& t, PolicyContext&) const override {
    NodeChoice c;
    if (!pick_default(n, t, c.pick)) return std::nullopt;
    return c;
  }
  bool packs_gangs() const override { return true; }
};

inline NodeSpec node_spec(std::string name, std::string model, int gpus, std::vector<std::string> path = {},
                          int64_t cpu = 64000, int64_t mem = 512 * 1024) {
  NodeSpec s;
  s.name = std::move(name);
  s.cpu = MilliCpu(cpu);
  s.memory = MiB(mem);
  s.gpu_model = std::move(model);
  s.gpu_count = gpus;
  s.path = std::move(path);
  return s;
}

inline TaskRequest whole(int gpus, int64_t cpu = 1000, int64_t mem = 1024) {
  TaskRequest t;
  t.cpu = MilliCpu(cpu);
  t.memory = MiB(mem);
  t.gpu_count = gpus;
  return t;
}

inline TaskRequest share(int64_t milli, int64_t cpu = 1000, int64_t mem = 1024) {
  TaskRequest t = whole(1, cpu, mem);
  t.milli_per_gpu = MilliGpu(milli);
  return t;
}

inline TaskRequest mig(std::string profile, int64_t cpu = 1000, int64_t mem = 1024) {
  TaskRequest t = whole(0, cpu, mem);
  t.mig_profile = std::move(profile);
  return t;
}

inline Gang gang(int tasks, TaskRequest t, int id = 1) {
  Gang g;
  g.id = JobId(uint32_t(id));
  g.name = "job-" + std::to_string(id);
  g.tasks = tasks;
  g.task = std::move(t);
  return g;
}

}  // namespace tessera::testing
