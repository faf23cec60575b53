// The policy registry behind make_policy() / policy_names().
#include <map>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>

#include "core/policies/policies.h"

namespace tessera {
namespace {

using Factory = std::unique_ptr<ScoringPolicy> (*)();
// Listed in the order the CLI reports them: the FGD paper's baselines, then ours.
constexpr std::pair<std::string_view, Factory> kPolicies[] = {
    {"random", policies::make_random},
    {"dotprod", policies::make_dotprod},
    {"gpu-clustering", policies::make_gpu_clustering},
    {"gpu-packing", policies::make_gpu_packing},
    {"best-fit", policies::make_best_fit},
    {"fgd", policies::make_fgd},
    {"spread", policies::make_spread},
    {"first-fit", policies::make_first_fit},
    {"tessera", policies::make_tessera},
};

}  // namespace

Result<std::unique_ptr<ScoringPolicy>> make_policy(std::string_view name) {
  for (const auto& [n, f] : kPolicies)
    if (n == name) return f();
  std::string known;
  for (const auto& [n, f] : kPolicies) known += (known.empty() ? "" : ", ") + std::string(n);
  return invalid_argument("unknown policy \"" + std::string(name) + "\"; known policies: " + known);
}

std::vector<std::string> policy_names() {
  std::vector<std::string> out;
  for (const auto& [n, f] : kPolicies) out.emplace_back(n);
  return out;
}

bool same_kind(const NodeKind& k, const Node& n) {
  const GpuModel* m = n.gpu_model();
  return k.gpus == int(n.gpus.size()) && k.cpu == n.cpu_capacity && k.memory == n.memory_capacity &&
         k.gpu_model == (m ? std::string_view(m->name) : std::string_view());
}

std::vector<NodeKind> node_kinds(const ClusterState& cluster) {
  std::vector<NodeKind> kinds;
  std::map<std::tuple<std::string, int, int64_t, int64_t>, size_t> index;
  for (const Node& n : cluster.nodes()) {
    const GpuModel* m = n.gpu_model();
    std::string model = m ? m->name : std::string();
    auto [it, fresh] = index.try_emplace({model, int(n.gpus.size()), n.cpu_capacity.v, n.memory_capacity.v}, kinds.size());
    if (fresh) kinds.push_back({std::move(model), int(n.gpus.size()), n.cpu_capacity, n.memory_capacity, 0});
    ++kinds[it->second].count;
  }
  return kinds;
}

}  // namespace tessera
