// The cluster config's storage: section (config/storage_config.h): parsing, the per-pool and
// per-queue lookups, host path prefixes, and bad sections naming their field.
#include "config/storage_config.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "config/cluster_config.h"

namespace tessera::config {
namespace {

const std::string kCluster = R"(
pools:
  - {name: gpu-a, kind: reserved}
  - {name: spot-a, kind: spot}
nodes:
  - {name: a, gpu_model: A100-80GB, gpus: 8, pool: gpu-a}
  - {name: s, gpu_model: A100-80GB, gpus: 8, pool: spot-a}
  - {name: d, gpu_model: A100-80GB, gpus: 8}
queues:
  - {name: research}
  - {name: vision, parent: research}
  - {name: nlp, parent: research}
)";

TEST(StorageConfig, ParsesEveryField) {
  auto c = parse_cluster_config_yaml(kCluster + R"(
storage:
  checkpoints: {path: /mnt/ckpt, pools: {spot-a: /mnt/spot-ckpt}}
  host_paths: [/mnt/shared, /home]
  datasets:
    - {name: imagenet, path: /mnt/datasets/imagenet, queues: [vision, nlp]}
    - {name: laion, pools: {gpu-a: /mnt/a/laion, default: /nfs/laion}}
  volumes:
    - {name: team-scratch, path: /mnt/scratch, writable: true, queues: [nlp]}
    - {name: logs, path: /mnt/logs}
)");
  ASSERT_TRUE(c.ok()) << c.error().message;
  const StorageConfig& s = c->storage;
  EXPECT_EQ(s.checkpoints, "/mnt/ckpt");
  EXPECT_EQ(s.checkpoints_on("spot-a"), "/mnt/spot-ckpt");
  EXPECT_EQ(s.checkpoints_on("gpu-a"), "/mnt/ckpt");
  EXPECT_EQ(s.host_paths, (std::vector<std::string>{"/mnt/shared", "/home"}));
  ASSERT_EQ(s.datasets.size(), 2u);
  ASSERT_EQ(s.volumes.size(), 2u);

  const DataSource* imagenet = s.dataset("imagenet");
  ASSERT_NE(imagenet, nullptr);
  EXPECT_FALSE(imagenet->writable);
  EXPECT_EQ(imagenet->path_on("gpu-a"), "/mnt/datasets/imagenet");
  EXPECT_EQ(imagenet->path_on("default"), "/mnt/datasets/imagenet");
  EXPECT_TRUE(imagenet->allows_queue({"vision", "research"}));
  EXPECT_FALSE(imagenet->allows_queue({"research"}));
  EXPECT_FALSE(imagenet->allows_queue({}));

  const DataSource* laion = s.dataset("laion");
  ASSERT_NE(laion, nullptr);
  EXPECT_EQ(laion->path_on("gpu-a"), "/mnt/a/laion");
  EXPECT_EQ(laion->path_on("default"), "/nfs/laion");
  EXPECT_EQ(laion->path_on("spot-a"), std::nullopt);
  EXPECT_TRUE(laion->allows_queue({"anything"}));

  const DataSource* scratch = s.volume("team-scratch");
  ASSERT_NE(scratch, nullptr);
  EXPECT_TRUE(scratch->writable);
  EXPECT_TRUE(scratch->allows_queue({"nlp", "research"}));
  EXPECT_FALSE(scratch->allows_queue({"vision", "research"}));
  EXPECT_FALSE(s.volume("logs")->writable);
  EXPECT_EQ(s.volume("imagenet"), nullptr);
  EXPECT_EQ(s.dataset("team-scratch"), nullptr);
}

TEST(StorageConfig, AbsentAndShortForms) {
  auto none = parse_cluster_config_yaml(kCluster);
  ASSERT_TRUE(none.ok()) << none.error().message;
  EXPECT_EQ(none->storage.checkpoints_on("default"), std::nullopt);
  EXPECT_FALSE(none->storage.host_path_allowed("/mnt/shared"));
  EXPECT_TRUE(none->storage.datasets.empty());

  auto c = parse_cluster_config_yaml(kCluster + "storage: {checkpoints: /mnt/ckpt}\n");
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c->storage.checkpoints_on("spot-a"), "/mnt/ckpt");
  EXPECT_TRUE(c->storage.checkpoint_pool_paths.empty());

  auto pools_only = parse_cluster_config_yaml(kCluster + "storage: {checkpoints: {pools: {gpu-a: /c}}}\n");
  ASSERT_TRUE(pools_only.ok()) << pools_only.error().message;
  EXPECT_EQ(pools_only->storage.checkpoints_on("gpu-a"), "/c");
  EXPECT_EQ(pools_only->storage.checkpoints_on("default"), std::nullopt);
}

TEST(StorageConfig, HostPathPrefixes) {
  StorageConfig s;
  s.host_paths = {"/mnt/shared", "/home"};
  EXPECT_TRUE(s.host_path_allowed("/mnt/shared"));
  EXPECT_TRUE(s.host_path_allowed("/mnt/shared/x/y"));
  EXPECT_TRUE(s.host_path_allowed("/home/alice"));
  EXPECT_FALSE(s.host_path_allowed("/mnt/sharedX"));
  EXPECT_FALSE(s.host_path_allowed("/mnt"));
  EXPECT_FALSE(s.host_path_allowed("/etc"));
}

std::string error_of(const std::string& storage) {
  auto c = parse_cluster_config_yaml(kCluster + storage);
  return c.ok() ? "(parsed)" : c.error().message;
}

TEST(StorageConfig, BadSectionsNameTheField) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"storage:\n  datasets:\n    - {name: a, path: /a}\n    - {name: b, pools: {gpu-x: /b}}\n",
       "storage.datasets[1].pools.gpu-x: no such pool; declared pools: default, gpu-a, spot-a"},
      {"storage: {datasets: [{name: a, path: /a, queues: [vision, robotics]}]}\n",
       "storage.datasets[0].queues[1]: no such queue \"robotics\"; declared queues: research, vision, nlp"},
      {"storage: {volumes: [{name: v, path: /v, queues: [nlp, nlp]}]}\n", "storage.volumes[0].queues[1]: \"nlp\" listed twice"},
      {"storage: {datasets: [{name: a, path: /a}, {name: a, path: /b}]}\n",
       "storage.datasets[1].name: \"a\" used twice (also datasets[0])"},
      {"storage: {volumes: [{name: v, path: /a}, {name: v, path: /b}]}\n", "storage.volumes[1].name: \"v\" used twice"},
      {"storage: {datasets: [{name: a, path: mnt/a}]}\n",
       "storage.datasets[0].path: must be an absolute path (starting with /), got \"mnt/a\""},
      {"storage: {datasets: [{name: a, path: /mnt/../a}]}\n", "storage.datasets[0].path: \"/mnt/../a\" has a \"..\" component"},
      {"storage: {datasets: [{name: a, pools: {gpu-a: /a/}}]}\n", "storage.datasets[0].pools.gpu-a: \"/a/\" ends in \"/\""},
      {"storage: {datasets: [{name: a}]}\n", "storage.datasets[0]: needs path (the host path on every pool) or pools"},
      {"storage: {datasets: [{path: /a}]}\n", "storage.datasets[0].name: required"},
      {"storage: {datasets: [{name: a b, path: /a}]}\n", "storage.datasets[0].name: \"a b\" is not a name"},
      {"storage: {datasets: [{name: a, path: /a, writable: true}]}\n",
       "storage.datasets[0].writable: unknown field; expected one of name, path, pools, queues"},
      {"storage: {volumes: [{name: v, path: /v, writable: maybe}]}\n", "storage.volumes[0].writable: wrong type"},
      {"storage: {volumes: [{name: v, path: /v, size: 10}]}\n", "storage.volumes[0].size: unknown field"},
      {"storage: {host_paths: [/mnt/shared, shared]}\n", "storage.host_paths[1]: must be an absolute path"},
      {"storage: {host_paths: [/]}\n", "storage.host_paths[0]: \"/\" would let jobs mount every host file"},
      {"storage: {host_paths: /mnt}\n", "storage.host_paths: must be a list"},
      {"storage: {checkpoints: ckpt}\n", "storage.checkpoints: must be an absolute path"},
      {"storage: {checkpoints: {pools: {nope: /c}}}\n", "storage.checkpoints.pools.nope: no such pool"},
      {"storage: {checkpoints: {dir: /c}}\n", "storage.checkpoints.dir: unknown field; expected one of path, pools"},
      {"storage: {checkpoints: {}}\n", "storage.checkpoints: needs path or pools"},
      {"storage: {caches: []}\n", "storage.caches: unknown field; expected one of checkpoints, host_paths, datasets, volumes"},
      {"storage: [/mnt]\n", "storage: must be a map"},
  };
  for (const auto& [storage, want] : cases) {
    const std::string got = error_of(storage);
    EXPECT_NE(got.find(want), std::string::npos) << "input: " << storage << "\n got: " << got << "\nwant: " << want;
  }
}

TEST(StorageConfig, DefaultQueueAndDefaultPoolAreAlwaysKnown) {
  auto c = parse_cluster_config_yaml(
      "nodes: [{name: n, gpu_model: T4, gpus: 1}]\n"
      "storage: {volumes: [{name: v, pools: {default: /v}, queues: [default]}]}\n");
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c->storage.volume("v")->path_on("default"), "/v");
}

}  // namespace
}  // namespace tessera::config
