// The podman command line a task's launch becomes, and the CDI names and spec of its GPUs: pure
// functions, no runtime needed (container_e2e_test.cc runs them for real).
#include <gtest/gtest.h>

#include <algorithm>

#include "agent/cdi.h"
#include "agent/container_runtime.h"

namespace tessera::agent {
namespace {

bool has_pair(const std::vector<std::string>& a, const std::string& flag, const std::string& value) {
  for (size_t i = 0; i + 1 < a.size(); ++i)
    if (a[i] == flag && a[i + 1] == value) return true;
  return false;
}

ContainerLaunch launch() {
  ContainerLaunch l;
  l.name = "tessera-n-1-j3-a1-t0";
  l.image = "localhost/train:1";
  l.argv = {"python3", "/app/train.py", "--lr", "0.1"};
  l.env = {{"RANK", "0"}};
  l.user = "1000:1000";
  l.mounts = {{"/mnt/data", "/data", true}, {"/mnt/scratch", "/scratch", false}};
  l.devices = {"nvidia.com/gpu=GPU-a", "nvidia.com/gpu=GPU-b"};
  l.labels = {{"tessera.agent", "n-1"}};
  l.memory_limit_mib = 2048;
  l.cpu_limit_milli = 1500;
  l.pids_limit = 100;
  l.env_file = "/state/env/x.env";
  return l;
}

TEST(PodmanArgs, CarryUserLimitsDevicesMountsAndTheCommandLast) {
  auto a = podman_run_args(PodmanOptions{"podman", "never"}, launch());
  ASSERT_TRUE(a.ok()) << a.error().message;
  const auto& v = *a;
  EXPECT_EQ(v[0], "podman");
  EXPECT_EQ(v[1], "run");
  EXPECT_TRUE(has_pair(v, "--user", "1000:1000"));
  EXPECT_TRUE(has_pair(v, "--pull", "never"));
  EXPECT_TRUE(has_pair(v, "--network", "host"));
  EXPECT_TRUE(has_pair(v, "--memory", "2048m"));
  EXPECT_TRUE(has_pair(v, "--memory-swap", "2048m"));
  EXPECT_TRUE(has_pair(v, "--cpus", "1.500"));
  EXPECT_TRUE(has_pair(v, "--pids-limit", "100"));
  EXPECT_TRUE(has_pair(v, "--device", "nvidia.com/gpu=GPU-b"));
  EXPECT_TRUE(has_pair(v, "--mount", "type=bind,source=/mnt/data,destination=/data,ro=true"));
  EXPECT_TRUE(has_pair(v, "--mount", "type=bind,source=/mnt/scratch,destination=/scratch"));
  EXPECT_TRUE(has_pair(v, "--env-file", "/state/env/x.env"));
  EXPECT_TRUE(has_pair(v, "--label", "tessera.agent=n-1"));
  EXPECT_TRUE(has_pair(v, "--security-opt", "no-new-privileges"));
  // The environment is never on the command line; the command comes last, after the image.
  EXPECT_EQ(std::find(v.begin(), v.end(), "RANK=0"), v.end());
  ASSERT_GE(v.size(), 5u);
  EXPECT_EQ(std::vector<std::string>(v.end() - 5, v.end()),
            (std::vector<std::string>{"localhost/train:1", "python3", "/app/train.py", "--lr", "0.1"}));
}

TEST(PodmanArgs, RefuseRootAndWhatCannotBePassed) {
  for (const char* user : {"0", "0:0", "1000:0", "", "abc", "-1"}) {
    ContainerLaunch l = launch();
    l.user = user;
    EXPECT_FALSE(podman_run_args(PodmanOptions{}, l).ok()) << user;
  }
  ContainerLaunch l = launch();
  l.env["X"] = "two\nlines";
  EXPECT_FALSE(podman_run_args(PodmanOptions{}, l).ok());
  l = launch();
  l.mounts.push_back({"/a,b", "/c", true});
  EXPECT_FALSE(podman_run_args(PodmanOptions{}, l).ok());
  l = launch();
  l.network = "none";
  auto a = podman_run_args(PodmanOptions{}, l);
  ASSERT_TRUE(a.ok());
  EXPECT_TRUE(has_pair(*a, "--network", "none"));
}

Inventory inventory() {
  Inventory inv;
  inv.source = "fake";
  for (int i = 0; i < 2; ++i) {
    GpuInfo g;
    g.index = i;
    g.uuid = "GPU-fake-" + std::to_string(i);
    inv.gpus.push_back(g);
  }
  inv.gpus[1].mig_enabled = true;
  MigInstanceInfo m;
  m.profile = "3g.40gb", m.start = 4, m.size = 4, m.uuid = "MIG-fake-x";
  inv.gpus[1].instances.push_back(m);
  return inv;
}

TEST(Cdi, DevicesAreNamedByUuid) {
  const Inventory inv = inventory();
  auto d = cdi_devices(inv, {1, 0});
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(*d, (std::vector<std::string>{"nvidia.com/gpu=GPU-fake-1", "nvidia.com/gpu=GPU-fake-0"}));
  auto m = cdi_devices(inv, {}, 1, 4);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(*m, std::vector<std::string>{"nvidia.com/gpu=MIG-fake-x"});
  EXPECT_FALSE(cdi_devices(inv, {2}).ok());
  EXPECT_FALSE(cdi_devices(inv, {}, 1, 0).ok());
}

TEST(Cdi, FakeSpecIsVersion050WithAPlaceholderNodePerDevice) {
  const auto spec = fake_cdi_spec(inventory());
  EXPECT_EQ(spec["cdiVersion"], "0.5.0");
  EXPECT_EQ(spec["kind"], "nvidia.com/gpu");
  ASSERT_EQ(spec["devices"].size(), 3u);
  EXPECT_EQ(spec["devices"][0]["name"], "GPU-fake-0");
  EXPECT_EQ(spec["devices"][0]["containerEdits"]["deviceNodes"][0]["path"], "/dev/nvidia0");
  EXPECT_EQ(spec["devices"][0]["containerEdits"]["deviceNodes"][0]["hostPath"], "/dev/null");
  EXPECT_EQ(spec["devices"][2]["name"], "MIG-fake-x");
  EXPECT_EQ(spec["devices"][2]["containerEdits"]["deviceNodes"][0]["path"], "/dev/nvidia1");
  EXPECT_EQ(spec["containerEdits"]["deviceNodes"][0]["path"], "/dev/nvidiactl");
}

}  // namespace
}  // namespace tessera::agent
