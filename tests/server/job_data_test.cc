// A job's container and mounts against the cluster's storage (server/job_data.h): what a queue may
// mount and how, the pools that hold a job's data, and the host paths an agent is given per pool.
#include <gtest/gtest.h>

#include "config/job_spec.h"
#include "server/job_data.h"

namespace tessera::server {
namespace {

using config::JobSpec;
using config::MountKind;
using config::MountSpec;

config::StorageConfig storage() {
  config::StorageConfig s;
  s.checkpoints = "/ckpt";
  s.checkpoint_pool_paths = {{"spot", "/spot-ckpt"}};
  s.host_paths = {"/mnt/shared"};
  s.datasets.push_back({"imagenet", "/mnt/imagenet", {}, false, {}});
  s.datasets.push_back({"laion", "", {{"spot", "/nfs/laion"}}, false, {}});
  s.volumes.push_back({"scratch", "/mnt/scratch", {}, true, {"nlp"}});
  return s;
}

JobSpec with(std::vector<MountSpec> mounts) {
  JobSpec j;
  j.container = config::ContainerSpec{"localhost/x:1", "", config::ContainerNetwork::kHost};
  j.mounts = std::move(mounts);
  return j;
}

std::vector<Pool> pools() {
  Pool d = default_pool();
  Pool s;
  s.id = PoolId(1);
  s.name = "spot";
  s.kind = PoolKind::kSpot;
  return {d, s};
}

TEST(JobData, QueuesHostPathsAndReadOnlyAreChecked) {
  const auto st = storage();
  EXPECT_TRUE(check_job_data(with({{MountKind::kDataset, "imagenet", "/data", {}}}), st, {"cv", "root"}).ok());
  // A volume open to nlp: a child queue of nlp may mount it, another queue may not (403).
  EXPECT_TRUE(check_job_data(with({{MountKind::kVolume, "scratch", "/s", false}}), st, {"nlp-a", "nlp"}).ok());
  auto denied = check_job_data(with({{MountKind::kVolume, "scratch", "/s", {}}}), st, {"cv"});
  ASSERT_FALSE(denied.ok());
  EXPECT_EQ(denied.error().code, ErrorCode::kPermissionDenied);
  EXPECT_NE(denied.message().find("mounts[0].volume"), std::string::npos) << denied.message();
  auto unknown = check_job_data(with({{MountKind::kDataset, "coco", "/d", {}}}), st, {"cv"});
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(unknown.message().find("imagenet, laion"), std::string::npos) << unknown.message();
  auto writable = check_job_data(with({{MountKind::kDataset, "imagenet", "/d", false}}), st, {"cv"});
  ASSERT_FALSE(writable.ok());
  EXPECT_NE(writable.message().find("mounts[0].read_only"), std::string::npos);
  EXPECT_TRUE(check_job_data(with({{MountKind::kHostPath, "/mnt/shared/x", "/x", {}}}), st, {"cv"}).ok());
  auto host = check_job_data(with({{MountKind::kHostPath, "/mnt/sharedX", "/x", {}}}), st, {"cv"});
  ASSERT_FALSE(host.ok());
  EXPECT_EQ(host.error().code, ErrorCode::kPermissionDenied);
  EXPECT_NE(host.message().find("mounts[0].host_path"), std::string::npos);
}

TEST(JobData, PoolsHoldingEveryMountedSource) {
  const auto st = storage();
  auto any = data_pools(with({{MountKind::kHostPath, "/mnt/shared", "/x", {}}}), st, pools());
  ASSERT_TRUE(any.ok());
  EXPECT_TRUE(any->empty());  // no dataset or volume: any pool
  auto both = data_pools(with({{MountKind::kDataset, "imagenet", "/d", {}}}), st, pools());
  ASSERT_TRUE(both.ok());
  EXPECT_EQ(both->size(), 2u);
  auto spot = data_pools(with({{MountKind::kDataset, "imagenet", "/d", {}}, {MountKind::kDataset, "laion", "/l", {}}}), st, pools());
  ASSERT_TRUE(spot.ok());
  ASSERT_EQ(spot->size(), 1u);
  EXPECT_EQ(spot->front(), PoolId(1));
  config::StorageConfig none = st;
  none.datasets[1].pool_paths = {{"gone", "/x"}};
  EXPECT_FALSE(data_pools(with({{MountKind::kDataset, "laion", "/l", {}}}), none, pools()).ok());
}

TEST(JobData, TheAgentGetsHostPathsOfItsPool) {
  const auto st = storage();
  const JobSpec j = with({{MountKind::kDataset, "laion", "/l", {}}, {MountKind::kVolume, "scratch", "/s", {}},
                          {MountKind::kHostPath, "/mnt/shared/t", "/t", false}});
  const auto a = task_data_json(j, st, "spot", 7);
  EXPECT_EQ(a["container"]["image"], "localhost/x:1");
  ASSERT_EQ(a["mounts"].size(), 3u);
  EXPECT_EQ(a["mounts"][0]["source"], "/nfs/laion");
  EXPECT_EQ(a["mounts"][0]["read_only"], true);
  EXPECT_EQ(a["mounts"][1]["read_only"], false);  // a writable volume, read_only left out
  EXPECT_EQ(a["mounts"][2]["source"], "/mnt/shared/t");
  EXPECT_EQ(a["checkpoint_host_dir"], "/spot-ckpt/job-7");
  EXPECT_EQ(task_data_json(j, st, "default", 7)["checkpoint_host_dir"], "/ckpt/job-7");
  EXPECT_TRUE(task_data_json(JobSpec{}, st, "default", 7)["container"].is_null());
}

}  // namespace
}  // namespace tessera::server
