// The cluster configuration file (config/cluster_config.h): the examples load, the new sections
// (queue priority classes, inline gpu_models) work, and bad configs name the field.
#include "config/cluster_config.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

namespace tessera::config {
namespace {

const std::string kBase = R"(
name: small
levels: [spine, leaf]
nodes:
  - {name: a, count: 2, gpu_model: A100-80GB, gpus: 8, cpu: 64000, memory: 524288, path: [s0, l0]}
  - {name: h, gpu_model: H100-80GB-SXM, gpus: 8, cpu: 64000, memory: 524288, path: [s0, l1], mig_gpus: [0]}
queues:
  - {name: org, guaranteed: {any: 16000}}
  - {name: infer, parent: org, guaranteed: {any: 8000}, weight: 2, priority_classes: [production-inference]}
  - {name: train, parent: org, guaranteed: {any: 8000}, limit: {any: 24000}}
config: {preset: tessera, backfill: true, max_scored_nodes: 64, max_victim_searches_per_cycle: 8}
policy: best-fit
)";

TEST(ClusterConfig, ExamplesLoad) {
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(std::string(TESSERA_SOURCE_DIR) + "/examples")) {
    if (e.path().extension() != ".yaml") continue;
    ++files;
    auto c = load_cluster_config(e.path().string());
    ASSERT_TRUE(c.ok()) << c.error().message;
    EXPECT_FALSE(c->nodes.empty()) << e.path();
    ASSERT_NE(c->catalog, nullptr);
    auto cluster = build_cluster_state(*c);
    ASSERT_TRUE(cluster.ok()) << cluster.error().message;
    EXPECT_GT(cluster->total_gpus(), 0);
  }
  EXPECT_GE(files, 1);
}

TEST(ClusterConfig, ParsesEverySection) {
  auto c = parse_cluster_config_yaml(kBase);
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c->name, "small");
  EXPECT_EQ(c->levels, (std::vector<std::string>{"spine", "leaf"}));
  ASSERT_EQ(c->nodes.size(), 3u);
  EXPECT_EQ(c->nodes[0].name, "a-0");
  EXPECT_EQ(c->nodes[1].name, "a-1");
  EXPECT_EQ(c->nodes[2].name, "h");
  EXPECT_EQ(c->nodes[2].mig_gpus, std::vector<int>{0});
  ASSERT_EQ(c->queues.size(), 3u);
  EXPECT_EQ(c->queues[1].weight, 2);
  EXPECT_EQ(c->queues[2].limit.at("any"), 24000);
  ASSERT_EQ(c->queue_classes.count("infer"), 1u);
  EXPECT_EQ(c->queue_classes.at("infer"), std::vector<std::string>{"production-inference"});
  EXPECT_EQ(c->queue_classes.count("train"), 0u);
  EXPECT_TRUE(c->scheduler.backfill);
  EXPECT_EQ(c->scheduler.policy, "best-fit");
  EXPECT_EQ(c->scheduler.max_scored_nodes, 64);
  EXPECT_EQ(c->scheduler.max_victim_searches_per_cycle, 8);
  auto cluster = build_cluster_state(*c);
  ASSERT_TRUE(cluster.ok()) << cluster.error().message;
  EXPECT_EQ(cluster->total_gpus(), 24);
}

TEST(ClusterConfig, DefaultsAndInlineGpuModels) {
  auto c = parse_cluster_config_yaml("nodes: [{name: n, gpu_model: T4, gpus: 1}]\n");
  ASSERT_TRUE(c.ok()) << c.error().message;
  ASSERT_EQ(c->queues.size(), 1u);
  EXPECT_EQ(c->queues[0].name, "default");
  ASSERT_NE(c->catalog, nullptr);
  EXPECT_TRUE(c->catalog->find("A100-80GB").ok());

  auto b = parse_cluster_config_yaml(R"(
gpu_models:
  - name: B200
    aliases: [NVIDIA B200]
    memory_mib: 184320
    memory_slices: 8
    compute_slices: 7
    mig_profiles:
      - {id: 19, name: 1g.23gb, compute_slices: 1, memory_slices: 1, starts: [0, 1, 2, 3, 4, 5, 6], max_instances: 7, memory_mib: 23552}
nodes: [{name: n, gpu_model: nvidia b200, gpus: 8, mig_gpus: [1]}]
)");
  ASSERT_TRUE(b.ok()) << b.error().message;
  auto model = b->catalog->find("B200");
  ASSERT_TRUE(model.ok());
  EXPECT_TRUE((*model)->mig_capable());
  EXPECT_TRUE(b->catalog->find("T4").ok()) << "declared models join the built-ins";
  auto cluster = build_cluster_state(*b);
  ASSERT_TRUE(cluster.ok()) << cluster.error().message;
  EXPECT_EQ(cluster->total_gpus(), 8);
}

// Issue 22: who may use which priority class is the config's policy: a class's `roles:`, and the
// default class (the one a job gets when it names none) that bounds the others.
TEST(ClusterConfig, PriorityClassRolesAndTheDefaultClass) {
  auto c = parse_cluster_config_yaml(R"(
nodes: [{name: n, gpu_model: T4, gpus: 1}]
priority_classes:
  - {name: production, value: 1000, roles: [team-lead]}
  - {name: research, value: 100}
  - {name: admins-only, value: 2000, roles: []}
  - {name: preemptible, value: 0}
)");
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c->class_roles.at("production"), std::vector<std::string>{"team-lead"});
  EXPECT_TRUE(c->class_roles.at("admins-only").empty());
  EXPECT_EQ(c->class_roles.count("research"), 0u) << "no roles: the default rule";
  ASSERT_NE(default_priority_class(*c), nullptr);
  EXPECT_EQ(default_priority_class(*c)->name, "research");
  // Without a class named research, the lowest class is the default.
  auto d = parse_cluster_config_yaml("nodes: [{name: n, gpu_model: T4, gpus: 1}]\n"
                                     "priority_classes: [{name: high, value: 10}, {name: low, value: 1}]\n");
  ASSERT_TRUE(d.ok()) << d.error().message;
  EXPECT_EQ(default_priority_class(*d)->name, "low");
  // Nodes: count: N > 1 names name-0 .. name-(N-1); no count, or count: 1, keeps the name (docs/server.md).
  auto e = parse_cluster_config_yaml("nodes: [{name: a, gpu_model: T4, gpus: 1}, {name: b, count: 1, gpu_model: T4, gpus: 1},"
                                     " {name: c, count: 2, gpu_model: T4, gpus: 1}]\n");
  ASSERT_TRUE(e.ok()) << e.error().message;
  std::vector<std::string> names;
  for (const auto& n : e->nodes) names.push_back(n.name);
  EXPECT_EQ(names, (std::vector<std::string>{"a", "b", "c-0", "c-1"}));
}

std::string error_of(const std::string& text) {
  auto c = parse_cluster_config_yaml(text);
  return c.ok() ? "(parsed)" : c.error().message;
}

TEST(ClusterConfig, BadConfigsNameTheField) {
  const std::string nodes = "nodes: [{name: n, gpu_model: A100-80GB, gpus: 8}]\n";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {nodes + "jobs: []\n", "cluster.jobs: unknown field; expected one of name, levels, nodes, queues, config, "
                             "priority_classes, policy, gpu_models"},
      {"levels: [leaf]\n", "nodes: required list"},
      {nodes + "queues: [{name: a, parent: nope}]\n", "queues[0] (queue \"a\": parent \"nope\" does not exist)"},
      {nodes + "queues: [{name: p, guaranteed: {any: 1000}}, {name: c1, parent: p, guaranteed: {any: 800}},"
               " {name: c2, parent: p, guaranteed: {any: 800}}]\n",
       "queues[0] (queue \"p\": children guarantee 1600"},
      {nodes + "queues: [{name: a, weight: 0}]\n", "queues[0] (queue \"a\": weight: must be >= 1"},
      {nodes + "queues: [{name: a}, {name: a}]\n", "queue \"a\": name: defined more than once"},
      {nodes + "queues: [{name: a, priority_classes: [gold]}]\n",
       "queues[0].priority_classes[0]: unknown class \"gold\"; expected one of production-inference"},
      {nodes + "queues: [{name: a, priority_class: [research]}]\n", "queues[0].priority_class: unknown field"},
      {nodes + "queues: {a: 1}\n", "queues: must be a list"},
      {"nodes: [{name: n, gpu_model: Z9000, gpus: 8}]\n", "nodes[0].gpu_model: "},
      {"nodes: [{name: n, gpus: 8}]\n", "nodes[0].gpu_model: required when gpus > 0"},
      {"nodes: [{name: n, gpu_model: T4, gpus: 1}, {name: n, gpu_model: T4, gpus: 1}]\n",
       "nodes[1].name: node \"n\" defined twice"},
      {"nodes: [{name: n, count: 2, gpu_model: T4, gpus: 1}, {name: n-1, gpu_model: T4, gpus: 1}]\n",
       "nodes[1].name: node \"n-1\" defined twice"},
      {"levels: [spine, leaf]\nnodes: [{name: n, gpu_model: T4, gpus: 1, path: [s0]}]\n",
       "nodes[0].path: needs one domain per network level (2: spine, leaf), got 1"},
      {"nodes: [{name: n, gpu_model: T4, gpus: 1, path: [s0]}]\n", "nodes[0].path: needs one domain per network level (0"},
      {"levels: [leaf, leaf]\nnodes: []\n", "levels[1]: \"leaf\" used twice"},
      {"levels: [node]\nnodes: []\n", "levels[0]: \"node\" is reserved"},
      {"levels: leaf\nnodes: []\n", "cluster.levels: wrong type"},
      {"nodes: [{name: n, gpu_model: T4, gpus: 99}]\n", "nodes[0].gpus: must be in 0..16, got 99"},
      {"nodes: [{name: n, gpu_model: T4, gpus: 1, count: 0}]\n", "nodes[0].count: must be >= 1"},
      {"nodes: [{name: n, gpu_model: T4, gpus: 1, count: 99999999999}]\n", "nodes[0].count: at most 100000"},
      {"nodes: [{name: n, gpu_model: T4, gpus: 1, mig_gpus: [0]}]\n", "nodes[0]: node 'n': mig_gpus: T4 does not support MIG"},
      {"nodes: [{name: n, gpu_model: T4, gpus: 1, cpus: 4}]\n", "nodes[0].cpus: unknown field"},
      {"nodes: [{name: n, gpu_model: T4, gpus: 1, memory: -1}]\n", "nodes[0].memory: must be in 0.."},
      {"nodes: [{name: n, gpu_model: T4, gpus: 1, cpu: 9223372036854775807}]\n", "nodes[0].cpu: must be in 0.."},
      {nodes + "queues: [{name: a, weight: 9223372036854775807}]\n", "queues[0].weight: at most 1000000"},
      {nodes + "queues: [{name: a, guaranteed: {any: 9223372036854775807}}]\n", "queues[0].guaranteed.any: at most"},
      {nodes + "config: {default_runtime: 9223372036854775807}\n", "config.default_runtime: at most"},
      {nodes + "policy: nope\n", "policy: unknown \"nope\"; expected one of"},
      {nodes + "config: {order: xyz}\n", "config.order: unknown \"xyz\""},
      {nodes + "config: {max_scored_nodes: -1}\n", "config.max_scored_nodes: must be >= 0"},
      {nodes + "config: {max_scored_nodes: 99999999999}\n", "config.max_scored_nodes: "},
      {nodes + "config: {max_victim_searches_per_cycle: -2}\n", "config.max_victim_searches_per_cycle: must be >= 0"},
      {nodes + "priority_classes: [{name: a, value: 1}, {name: a, value: 2}]\n", "priority_classes[1].name: \"a\" used twice"},
      {nodes + "priority_classes: [{name: a, value: 1, roles: [member, owner]}]\n",
       "priority_classes[0].roles[1]: unknown role \"owner\"; expected team-lead or member"},
      {nodes + "gpu_models: [{name: X}]\n", "gpu_models[0].memory_mib: required"},
      {nodes + "gpu_models: [{name: t4, memory_mib: 1}]\n", "gpu_models: "},
      {"nodes: [{name: n\n", "cluster: not valid YAML at line"},
      {"- 1\n", "cluster: expected a map"},
  };
  for (const auto& [text, want] : cases) {
    const std::string got = error_of(text);
    EXPECT_NE(got.find(want), std::string::npos) << "config:\n" << text << "error: " << got << "\nwanted: " << want;
  }
}

TEST(ClusterConfig, UnknownGpuModelListsTheKnownOnes) {
  const std::string got = error_of("nodes: [{name: n, gpu_model: Z9000, gpus: 8}]\n");
  EXPECT_EQ(got.rfind("nodes[0].gpu_model: ", 0), 0u) << got;
  EXPECT_NE(got.find("Z9000"), std::string::npos) << got;
  EXPECT_NE(got.find("H100-80GB-SXM"), std::string::npos) << got;
}

TEST(ClusterConfig, LoadNamesTheFile) {
  auto c = load_cluster_config("/nonexistent/cluster.yaml");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.error().message.find("/nonexistent/cluster.yaml"), std::string::npos);
}

// `chargeback:` (issue 7): rates per GPU model in integer micro-units, the currency, the idle-share rule.
TEST(ClusterConfig, ChargebackSection) {
  auto none = parse_cluster_config_yaml("nodes: [{name: n, gpu_model: T4, gpus: 1}]\n");
  ASSERT_TRUE(none.ok()) << none.error().message;
  EXPECT_TRUE(none->chargeback.rates_micro.empty());
  EXPECT_EQ(none->chargeback.currency, "USD");
  EXPECT_EQ(none->chargeback.idle_share, IdleShare::kProportional) << "proportional is the default";

  auto c = parse_cluster_config_yaml(R"(
nodes: [{name: n, gpu_model: A100-80GB, gpus: 8}]
chargeback:
  rates: {H100-80GB-SXM: "2.49", a100-80gb: 1.6, T4: 0, L4: "0.000001", H200-141GB: "12"}
  currency: EUR
  idle_share: even
)");
  ASSERT_TRUE(c.ok()) << c.error().message;
  const auto& r = c->chargeback.rates_micro;
  ASSERT_EQ(r.size(), 5u);
  EXPECT_EQ(r.at("H100-80GB-SXM"), 2490000);
  EXPECT_EQ(r.at("A100-80GB"), 1600000) << "an alias/case variant is stored under the canonical name";
  EXPECT_EQ(r.at("T4"), 0);
  EXPECT_EQ(r.at("L4"), 1);
  EXPECT_EQ(r.at("H200-141GB"), 12000000);
  EXPECT_EQ(c->chargeback.currency, "EUR");
  EXPECT_EQ(c->chargeback.idle_share, IdleShare::kEven);
  auto n = parse_cluster_config_yaml("nodes: [{name: n, gpu_model: T4, gpus: 1}]\nchargeback: {idle_share: none}\n");
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(n->chargeback.idle_share, IdleShare::kNone);
  EXPECT_STREQ(idle_share_name(IdleShare::kNone), "none");
}

TEST(ClusterConfig, ChargebackErrorsNameTheField) {
  const std::string nodes = "nodes: [{name: n, gpu_model: A100-80GB, gpus: 8}]\n";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {nodes + "chargeback: {rate: {}}\n", "chargeback.rate: unknown field; expected one of rates, currency, idle_share"},
      {nodes + "chargeback: [1]\n", "chargeback: must be a map"},
      {nodes + "chargeback: {rates: [1]}\n", "chargeback.rates: must be a map"},
      {nodes + "chargeback: {rates: {Z9000: 1}}\n", "chargeback.rates.Z9000: "},
      {nodes + "chargeback: {rates: {T4: abc}}\n", "chargeback.rates.T4: must be a price >= 0 with at most 6 decimals"},
      {nodes + "chargeback: {rates: {T4: -1}}\n", "chargeback.rates.T4: must be a price"},
      {nodes + "chargeback: {rates: {T4: \"1.1234567\"}}\n", "chargeback.rates.T4: must be a price"},
      {nodes + "chargeback: {rates: {T4: \"1.\"}}\n", "chargeback.rates.T4: must be a price"},
      {nodes + "chargeback: {rates: {T4: 1e3}}\n", "chargeback.rates.T4: must be a price"},
      {nodes + "chargeback: {rates: {T4: [1]}}\n", "chargeback.rates.T4: must be a price"},
      {nodes + "chargeback: {rates: {T4: 1, t4: 2}}\n", "chargeback.rates.t4: model \"T4\" has a rate already"},
      {nodes + "chargeback: {rates: {T4: \"1234567890123\"}}\n", "at most 12 digits"},
      {nodes + "chargeback: {currency: dollars}\n", "chargeback.currency: \"dollars\" is not an ISO 4217 code"},
      {nodes + "chargeback: {idle_share: fair}\n", "chargeback.idle_share: unknown \"fair\"; expected one of proportional, even, none"},
  };
  for (const auto& [text, want] : cases) {
    const std::string got = error_of(text);
    EXPECT_NE(got.find(want), std::string::npos) << "config:\n" << text << "error: " << got << "\nwanted: " << want;
  }
}

TEST(ClusterConfig, PriceParsing) {
  EXPECT_EQ(*parse_price_micro("0"), 0);
  EXPECT_EQ(*parse_price_micro("2.49"), 2490000);
  EXPECT_EQ(*parse_price_micro("0.123456"), 123456);
  EXPECT_EQ(*parse_price_micro("999999999999.999999"), 999999999999999999);
  EXPECT_FALSE(parse_price_micro("").ok());
  EXPECT_FALSE(parse_price_micro(".5").ok());
  EXPECT_FALSE(parse_price_micro("1,5").ok());
  EXPECT_FALSE(parse_price_micro(" 1").ok());
}

}  // namespace
}  // namespace tessera::config

namespace tessera::config {
namespace {

TEST(ClusterConfig, PoolsAndPoolRules) {
  auto c = parse_cluster_config_yaml(R"(
pools:
  - {name: base, kind: reserved, price: "1.90"}
  - {name: burst, kind: on-demand, price: 3.10, provisioning_delay: 300, max_nodes: 8}
  - {name: spot-a, kind: spot, price: "0.95", interruption_rate: "0.05", notice: 30, min_nodes: 0, max_nodes: 16}
  - {name: spot-b, kind: spot}
pool_rules: {inference_kinds: [owned, reserved, on-demand]}
nodes:
  - {name: o, gpu_model: H100-80GB-SXM, gpus: 8}
  - {name: s, count: 2, gpu_model: H100-80GB-SXM, gpus: 8, pool: spot-a}
  - {name: r, gpu_model: H100-80GB-SXM, gpus: 8, pool: base}
)");
  ASSERT_TRUE(c.ok()) << c.error().message;
  ASSERT_EQ(c->pools.size(), 4u);
  EXPECT_EQ(c->pools[0].price_micro_per_gpu_hour, 1900000);
  EXPECT_EQ(c->pools[1].price_micro_per_gpu_hour, 3100000);
  EXPECT_EQ(c->pools[1].provisioning_delay_s, 300);
  EXPECT_EQ(c->pools[1].max_nodes, 8);
  EXPECT_EQ(c->pools[2].interruptions_per_million_hours, 50000);
  EXPECT_EQ(c->pools[2].notice_s, 30);
  EXPECT_EQ(c->pools[3].notice_s, 120);  // the AWS default
  EXPECT_FALSE(c->pools[3].price_micro_per_gpu_hour.has_value());
  EXPECT_EQ(c->scheduler.pool_rules.inference_kinds, kAnyPoolKind & ~pool_kind_bit(PoolKind::kSpot));
  auto cluster = build_cluster_state(*c);
  ASSERT_TRUE(cluster.ok()) << cluster.error().message;
  ASSERT_EQ(cluster->pools().size(), 5u);
  const Node& o = cluster->node(cluster->find_node("o").value());
  const Node& s1 = cluster->node(cluster->find_node("s-1").value());
  const Node& r = cluster->node(cluster->find_node("r").value());
  EXPECT_EQ(cluster->pool(o.pool).name, "default");
  EXPECT_EQ(o.pool_kind, PoolKind::kOwned);
  EXPECT_EQ(cluster->pool(s1.pool).name, "spot-a");
  EXPECT_EQ(s1.pool_kind, PoolKind::kSpot);
  EXPECT_EQ(cluster->pool(r.pool).name, "base");
  EXPECT_EQ(r.pool_kind, PoolKind::kReserved);
}

TEST(ClusterConfig, SpotDetailsAndAutoscaling) {
  auto c = parse_cluster_config_yaml(R"(
pools:
  - {name: spot-a, kind: spot, interruption_rate: "0.5", correlated: 50, interruption_trace: /data/spot.csv}
pool_rules: {spot_max_interruptions: 5, on_demand_fallback_after: 600}
autoscaling: {scale_down_idle: 900, budget: "250.50", consolidate_below: 40, consolidate_min_runtime: 1800}
nodes:
  - {name: s, gpu_model: H100-80GB-SXM, gpus: 8, pool: spot-a}
)");
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c->pools[0].correlated_pct, 50);
  EXPECT_EQ(c->pools[0].interruption_trace, "/data/spot.csv");
  EXPECT_EQ(c->scheduler.pool_rules.spot_max_interruptions, 5);
  EXPECT_TRUE(c->autoscaling.enabled);  // the section's presence turns it on
  EXPECT_EQ(c->autoscaling.scale_down_idle_s, 900);
  EXPECT_EQ(c->autoscaling.budget_micro_per_hour, 250500000);
  EXPECT_EQ(c->autoscaling.consolidate_below_pct, 40);
  EXPECT_EQ(c->autoscaling.consolidate_min_runtime_s, 1800);
  EXPECT_EQ(c->scheduler.pool_rules.on_demand_fallback_after_s, 600);
  auto off = parse_cluster_config_yaml("autoscaling: {enabled: false}\nnodes: [{name: n, gpu_model: T4, gpus: 1}]\n");
  ASSERT_TRUE(off.ok()) << off.error().message;
  EXPECT_FALSE(off->autoscaling.enabled);
  auto none = parse_cluster_config_yaml("nodes: [{name: n, gpu_model: T4, gpus: 1}]\n");
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->autoscaling.enabled);
  EXPECT_EQ(none->scheduler.pool_rules.spot_max_interruptions, 3);
  EXPECT_EQ(none->scheduler.pool_rules.on_demand_fallback_after_s, -1);
  EXPECT_EQ(none->autoscaling.consolidate_below_pct, 50);
}

TEST(ClusterConfig, OwnedPoolPricedFromItsHardware) {
  // The cost reference's 8x H100 node: $375k over 36 months, 8 kW drawn at PUE 1.3 and $0.08/kWh,
  // colocation on 10.2 kW at $196/kW-month, $2.5k support a month: $15,523 a server-month.
  auto c = parse_cluster_config_yaml(R"(
pools:
  - name: dc1
    kind: owned
    owned_cost: {server_capex: "375000", gpus_per_server: 8, amortisation_months: 36, provisioned_kw: 10.2,
                 average_draw_kw: 8, pue: 1.3, electricity_per_kwh: "0.08", colocation_per_kw_month: "196",
                 support_per_server_month: "2500"}
nodes:
  - {name: h, gpu_model: H100-80GB-SXM, gpus: 8, pool: dc1}
)");
  ASSERT_TRUE(c.ok()) << c.error().message;
  ASSERT_TRUE(c->pools[0].price_micro_per_gpu_hour.has_value());
  EXPECT_NEAR(double(*c->pools[0].price_micro_per_gpu_hour), 15523.0 * 1e6 / (8 * 730), 1000);  // $2.658
  const std::string nodes = "nodes: [{name: n, gpu_model: T4, gpus: 1}]\n";
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"pools: [{name: a, kind: reserved, owned_cost: {server_capex: '1'}}]\n", "pools[0].owned_cost: only owned pools"},
      {"pools: [{name: a, kind: owned, price: '1', owned_cost: {server_capex: '1'}}]\n", "give either price or owned_cost"},
      {"pools: [{name: a, kind: owned, owned_cost: {gpus_per_server: 8}}]\n", "pools[0].owned_cost.server_capex: required"},
      {"pools: [{name: a, kind: owned, owned_cost: {server_capex: lots}}]\n", "pools[0].owned_cost.server_capex: an amount"},
      {"pools: [{name: a, kind: owned, owned_cost: {server_capex: '1', pue: 0.5}}]\n", "pools[0].owned_cost: pue must be >= 1"},
      {"pools: [{name: a, kind: owned, owned_cost: {server_capex: '1', watts: 3}}]\n", "pools[0].owned_cost.watts: unknown field"},
  };
  for (const auto& [text, want] : bad) {
    auto r = parse_cluster_config_yaml(text + nodes);
    const std::string got = r.ok() ? "(ok)" : r.error().message;
    EXPECT_NE(got.find(want), std::string::npos) << got << "\nwanted: " << want;
  }
}

TEST(ClusterConfig, NoPoolsMeansTheDefaultPool) {
  auto c = parse_cluster_config_yaml(kBase);
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_TRUE(c->pools.empty());
  EXPECT_EQ(c->scheduler.pool_rules.inference_kinds,
            pool_kind_bit(PoolKind::kOwned) | pool_kind_bit(PoolKind::kReserved));
  auto cluster = build_cluster_state(*c);
  ASSERT_TRUE(cluster.ok());
  for (const Node& n : cluster->nodes()) EXPECT_EQ(cluster->pool(n.pool).name, "default");
  // "default" may be redefined once, e.g. as a reserved pool with a price.
  auto d = parse_cluster_config_yaml("pools: [{name: default, kind: reserved, price: '2'}]\n"
                                     "nodes: [{name: n, gpu_model: T4, gpus: 1}]\n");
  ASSERT_TRUE(d.ok()) << d.error().message;
  auto dc = build_cluster_state(*d);
  ASSERT_TRUE(dc.ok());
  EXPECT_EQ(dc->node(NodeId(0)).pool_kind, PoolKind::kReserved);
  EXPECT_EQ(dc->pools().size(), 1u);
}

TEST(ClusterConfig, BadPoolsNameTheField) {
  const std::string nodes = "nodes: [{name: n, gpu_model: A100-80GB, gpus: 8}]\n";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"pools: [{name: a}]\n" + nodes, "pools[0].kind: required"},
      {"pools: [{kind: spot}]\n" + nodes, "pools[0].name: required"},
      {"pools: [{name: a, kind: cheap}]\n" + nodes, "pools[0].kind: unknown pool kind 'cheap'"},
      {"pools: [{name: a, kind: spot, price: '-1'}]\n" + nodes, "pools[0].price: must be a price >= 0"},
      {"pools: [{name: a, kind: spot, price: 1.1234567}]\n" + nodes, "pools[0].price: must be a price"},
      {"pools: [{name: a, kind: spot, prize: 1}]\n" + nodes, "pools[0].prize: unknown field"},
      {"pools: [{name: a, kind: owned, notice: 30}]\n" + nodes, "pools[0].notice: only spot pools are interrupted"},
      {"pools: [{name: a, kind: reserved, interruption_rate: '0.1'}]\n" + nodes,
       "pools[0].interruption_rate: only spot pools"},
      {"pools: [{name: a, kind: spot, interruption_rate: lots}]\n" + nodes, "pools[0].interruption_rate: must be"},
      {"pools: [{name: a, kind: spot, notice: -5}]\n" + nodes, "pools[0].notice: must be >= 0"},
      {"pools: [{name: a, kind: spot, min_nodes: 4, max_nodes: 2}]\n" + nodes, "pools[0].min_nodes: must be <= max_nodes"},
      {"pools: [{name: a, kind: spot}, {name: a, kind: owned}]\n" + nodes, "pools[1].name: \"a\" defined twice"},
      {"pools: {a: spot}\n" + nodes, "pools: must be a list"},
      {"nodes: [{name: n, gpu_model: T4, gpus: 1}, {name: gpu-7, gpu_model: T4, gpus: 1, pool: spot-z}]\n",
       "nodes[1].pool: node \"gpu-7\" names unknown pool \"spot-z\"; declared pools: default"},
      {"pool_rules: {inference_kinds: [owned, gold]}\n" + nodes, "pool_rules.inference_kinds[1]: unknown pool kind 'gold'"},
      {"pool_rules: {inference_kinds: []}\n" + nodes, "pool_rules.inference_kinds: must be a non-empty list"},
      {"pool_rules: {training_kinds: [spot]}\n" + nodes, "pool_rules.training_kinds: unknown field"},
      {"pool_rules: {spot_max_interruptions: -1}\n" + nodes, "pool_rules.spot_max_interruptions: must be >= 0"},
      {"pools: [{name: a, kind: spot, correlated: 150}]\n" + nodes, "pools[0].correlated: percent of the pool's nodes"},
      {"pools: [{name: a, kind: on-demand, correlated: 50}]\n" + nodes, "pools[0].correlated: only spot pools"},
      {"pools: [{name: a, kind: owned, interruption_trace: t.csv}]\n" + nodes, "pools[0].interruption_trace: only spot"},
      {"autoscaling: {enabled: true, budget: lots}\n" + nodes, "autoscaling.budget: the most the elastic pools may cost"},
      {"autoscaling: {scale_down_idle: -1}\n" + nodes, "autoscaling.scale_down_idle: must be >= 0"},
      {"autoscaling: {enable: true}\n" + nodes, "autoscaling.enable: unknown field"},
      {"autoscaling: [1]\n" + nodes, "autoscaling: must be a map"},
      {"autoscaling: {consolidate_below: 101}\n" + nodes, "autoscaling.consolidate_below: percent of a node's GPUs"},
      {"pool_rules: {on_demand_fallback_after: -3}\n" + nodes, "pool_rules.on_demand_fallback_after: must be >= 0"},
  };
  for (const auto& [text, want] : cases) {
    auto c = parse_cluster_config_yaml(text);
    const std::string got = c.ok() ? "(ok)" : c.error().message;
    EXPECT_NE(got.find(want), std::string::npos) << "config:\n" << text << "error: " << got << "\nwanted: " << want;
  }
}

}  // namespace
}  // namespace tessera::config
