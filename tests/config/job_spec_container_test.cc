// A job spec's container and mounts (config/job_spec_container.h): JSON and YAML agree, the canonical
// round trip, specs stored before these fields still parse, and bad containers and mounts name their
// field and say why.
#include "config/job_spec.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

namespace tessera::config {
namespace {

const char* kJson = R"({
  "name": "train", "queue": "q", "command": ["python", "train.py"],
  "checkpoint": {"interval": 600, "dir": "/ckpt"},
  "container": {"image": "localhost/train:2026-11", "user": "1000:1000", "network": "none"},
  "mounts": [{"dataset": "imagenet", "path": "/data"},
             {"volume": "team-scratch", "path": "/scratch", "read_only": false},
             {"host_path": "/mnt/shared/x", "path": "/x", "read_only": true}]})";

const char* kYaml = R"(
name: train
queue: q
command: [python, train.py]
checkpoint: {interval: 600, dir: /ckpt}
container:
  image: localhost/train:2026-11
  user: "1000:1000"
  network: none
mounts:
  - {dataset: imagenet, path: /data}
  - {volume: team-scratch, path: /scratch, read_only: false}
  - {host_path: /mnt/shared/x, path: /x, read_only: true}
)";

std::string spec_with(const std::string& extra) {
  return R"({"name": "j", "queue": "q", "command": ["x"])" + (extra.empty() ? "" : ", " + extra) + "}";
}
const std::string kImage = R"("container": {"image": "img"})";

TEST(JobSpecContainer, JsonAndYamlAgree) {
  auto j = parse_job_spec_json(kJson);
  ASSERT_TRUE(j.ok()) << j.error().message;
  auto y = parse_job_spec_yaml(kYaml);
  ASSERT_TRUE(y.ok()) << y.error().message;
  EXPECT_EQ(*j, *y);
  ASSERT_TRUE(j->container.has_value());
  EXPECT_EQ(j->container->image, "localhost/train:2026-11");
  EXPECT_EQ(j->container->user, "1000:1000");
  EXPECT_EQ(j->container->network, ContainerNetwork::kNone);
  ASSERT_EQ(j->mounts.size(), 3u);
  EXPECT_EQ(j->mounts[0], (MountSpec{MountKind::kDataset, "imagenet", "/data", std::nullopt}));
  EXPECT_EQ(j->mounts[1], (MountSpec{MountKind::kVolume, "team-scratch", "/scratch", false}));
  EXPECT_EQ(j->mounts[2], (MountSpec{MountKind::kHostPath, "/mnt/shared/x", "/x", true}));
  EXPECT_STREQ(mount_kind_name(MountKind::kHostPath), "host_path");
  EXPECT_STREQ(container_network_name(ContainerNetwork::kHost), "host");
}

TEST(JobSpecContainer, Defaults) {
  auto s = parse_job_spec_json(spec_with(kImage));
  ASSERT_TRUE(s.ok()) << s.error().message;
  ASSERT_TRUE(s->container.has_value());
  EXPECT_EQ(s->container->user, "");
  EXPECT_EQ(s->container->network, ContainerNetwork::kHost);
  EXPECT_TRUE(s->mounts.empty());
  auto bare = parse_job_spec_json(spec_with(R"("container": null, "mounts": [])"));
  ASSERT_TRUE(bare.ok()) << bare.error().message;
  EXPECT_FALSE(bare->container.has_value());
  auto uid_only = parse_job_spec_json(spec_with(R"("container": {"image": "i", "user": "4242"})"));
  ASSERT_TRUE(uid_only.ok()) << uid_only.error().message;
  EXPECT_EQ(uid_only->container->user, "4242");
}

TEST(JobSpecContainer, RoundTrip) {
  for (const std::string& text : {std::string(kJson), spec_with(kImage), spec_with("")}) {
    auto s = parse_job_spec_json(text);
    ASSERT_TRUE(s.ok()) << s.error().message;
    const nlohmann::json j = job_spec_to_json(*s);
    auto back = job_spec_from_json(j);
    ASSERT_TRUE(back.ok()) << back.error().message << "\n" << j.dump();
    EXPECT_EQ(*back, *s) << j.dump();
    EXPECT_EQ(job_spec_to_json(*back), j);
  }
  const nlohmann::json j = job_spec_to_json(*parse_job_spec_json(kJson));
  EXPECT_EQ(j["container"], nlohmann::json::parse(R"({"image": "localhost/train:2026-11", "user": "1000:1000", "network": "none"})"));
  EXPECT_EQ(j["mounts"], nlohmann::json::parse(R"([{"dataset": "imagenet", "path": "/data", "read_only": null},
      {"volume": "team-scratch", "path": "/scratch", "read_only": false},
      {"host_path": "/mnt/shared/x", "path": "/x", "read_only": true}])"));
  const nlohmann::json none = job_spec_to_json(*parse_job_spec_json(spec_with("")));
  EXPECT_TRUE(none["container"].is_null());
  EXPECT_EQ(none["mounts"], nlohmann::json::array());
}

TEST(JobSpecContainer, SpecsStoredBeforeStillParse) {
  nlohmann::json stored = job_spec_to_json(*parse_job_spec_json(spec_with("")));
  stored.erase("container");
  stored.erase("mounts");
  auto s = job_spec_from_json(stored);
  ASSERT_TRUE(s.ok()) << s.error().message;
  EXPECT_FALSE(s->container.has_value());
  EXPECT_TRUE(s->mounts.empty());
}

TEST(JobSpecContainer, EqualityCoversTheNewFields) {
  auto a = parse_job_spec_json(kJson);
  ASSERT_TRUE(a.ok());
  JobSpec b = *a;
  b.mounts[0].read_only = true;
  EXPECT_FALSE(b == *a);
  b = *a;
  b.container->user = "1001";
  EXPECT_FALSE(b == *a);
  b = *a;
  b.container.reset();
  EXPECT_FALSE(b == *a);
}

TEST(JobSpecContainer, BadContainersAndMountsNameTheField) {
  auto with_mounts = [](const std::string& mounts) { return spec_with(kImage + R"(, "mounts": )" + mounts); };
  const std::vector<std::pair<std::string, std::string>> cases = {
      {spec_with(R"("container": {"image": "i", "user": "0"})"), "container.user: uid 0 is root's; jobs never run as root"},
      {spec_with(R"("container": {"image": "i", "user": "0:1000"})"), "container.user: uid 0 is root's"},
      {spec_with(R"("container": {"image": "i", "user": "1000:0"})"), "container.user: gid 0 is root's"},
      {spec_with(R"("container": {"image": "i", "user": "root"})"), "container.user: must be \"UID\" or \"UID:GID\" in digits"},
      {spec_with(R"("container": {"image": "i", "user": "1000:"})"), "container.user: must be \"UID\" or \"UID:GID\""},
      {spec_with(R"("container": {"image": "i", "user": "007"})"), "container.user: must be \"UID\" or \"UID:GID\" in digits without leading zeros"},
      {spec_with(R"("container": {"image": "i", "user": "4294967295"})"), "container.user: uid 4294967295 is out of range"},
      {spec_with(R"("container": {"image": "i", "user": 1000})"), "container.user: must be a string, got integer"},
      {spec_with(R"("container": {"user": "1000"})"), "container.image: required"},
      {spec_with(R"("container": {"image": ""})"), "container.image: must not be empty"},
      {spec_with(R"("container": {"image": "a b"})"), "container.image: \"a b\" has whitespace"},
      {spec_with(R"("container": {"image": "a\tb"})"), "container.image: must be valid UTF-8 without control characters"},
      {spec_with(R"("container": {"image": ")" + std::string(513, 'x') + "\"}"), "container.image: too long: 513 bytes; at most 512"},
      {spec_with(R"("container": {"image": "i", "network": "bridge"})"), "container.network: must be host or none, got \"bridge\""},
      {spec_with(R"("container": {"image": "i", "privileged": true})"), "container.privileged: unknown field; expected one of image, user, network"},
      {spec_with(R"("container": "img")"), "container: must be an object"},
      {spec_with(R"("mounts": [{"dataset": "d", "path": "/data"}])"),
       "mounts: need container.image: bare processes see the host's files"},
      {with_mounts(R"([{"dataset": "d", "path": "/data"}, {"volume": "v", "path": "/data"}])"),
       "mounts[1].path: \"/data\" is also mounts[0].path; each mount needs its own path"},
      {with_mounts(R"([{"dataset": "d", "path": "data"}])"), "mounts[0].path: must be an absolute path (starting with /), got \"data\""},
      {with_mounts(R"([{"dataset": "d", "path": "/data/../etc"}])"), "mounts[0].path: \"/data/../etc\" has a \"..\" component"},
      {with_mounts(R"([{"dataset": "d", "path": "/data/./x"}])"), "mounts[0].path: \"/data/./x\" has a \".\" component"},
      {with_mounts(R"([{"dataset": "d", "path": "/data//x"}])"), "mounts[0].path: \"/data//x\" has \"//\""},
      {with_mounts(R"([{"dataset": "d", "path": "/data/"}])"), "mounts[0].path: \"/data/\" ends in \"/\""},
      {with_mounts(R"([{"dataset": "d", "path": "/"}])"), "mounts[0].path: must not be /"},
      {with_mounts(R"([{"dataset": "d", "path": "/proc/x"}])"), "mounts[0].path: \"/proc/x\" is under /proc"},
      {with_mounts(R"([{"dataset": "d", "path": "/sys"}])"), "mounts[0].path: \"/sys\" is under /sys"},
      {with_mounts(R"([{"dataset": "d", "path": "/dev/shm"}])"), "mounts[0].path: \"/dev/shm\" is under /dev"},
      {with_mounts(R"([{"dataset": "d", "path": "/data", "mode": "ro"}])"),
       "mounts[0].mode: unknown field; expected one of dataset, volume, host_path, path, read_only"},
      {with_mounts(R"([{"dataset": "d", "volume": "v", "path": "/data"}])"),
       "mounts[0]: has more than one source (dataset, volume); give exactly one of dataset, volume or host_path"},
      {with_mounts(R"([{"path": "/data"}])"), "mounts[0]: needs a source: one of dataset, volume or host_path"},
      {with_mounts(R"([{"dataset": "d"}])"), "mounts[0].path: required"},
      {with_mounts(R"([{"dataset": "bad name", "path": "/data"}])"), "mounts[0].dataset: \"bad name\" is not a name"},
      {with_mounts(R"([{"volume": ")" + std::string(129, 'v') + R"(", "path": "/v"}])"), "mounts[0].volume: too long: 129 bytes"},
      {with_mounts(R"([{"host_path": "mnt/x", "path": "/x"}])"), "mounts[0].host_path: must be an absolute path"},
      {with_mounts(R"([{"host_path": "/mnt/../etc", "path": "/x"}])"), "mounts[0].host_path: \"/mnt/../etc\" has a \"..\" component"},
      {with_mounts(R"([{"dataset": "d", "path": "/data", "read_only": "yes"}])"), "mounts[0].read_only: must be true or false, got string"},
      {with_mounts(R"({"dataset": "d", "path": "/data"})"), "mounts: must be a list"},
      {with_mounts(R"(["d:/data"])"), "mounts[0]: must be an object"},
      {with_mounts(R"([{"dataset": "d", "path": "/ckpt"}])").insert(1, R"("checkpoint": {"dir": "/ckpt"}, )"),
       "mounts[0].path: \"/ckpt\" is checkpoint.dir"},
  };
  for (const auto& [text, want] : cases) {
    auto r = parse_job_spec_json(text);
    ASSERT_FALSE(r.ok()) << text;
    EXPECT_NE(r.error().message.find(want), std::string::npos) << "input: " << text << "\n got: " << r.error().message
                                                              << "\nwant: " << want;
  }
}

TEST(JobSpecContainer, MountLimitsAndPathLength) {
  std::string many = "[";
  for (int i = 0; i < 65; ++i) many += std::string(i ? ", " : "") + R"({"dataset": "d", "path": "/m)" + std::to_string(i) + "\"}";
  many += "]";
  auto r = parse_job_spec_json(spec_with(kImage + R"(, "mounts": )" + many));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message, "mounts: too many: 65; at most 64");
  const std::string long_path = "/" + std::string(1024, 'p');
  r = parse_job_spec_json(spec_with(kImage + R"(, "mounts": [{"dataset": "d", "path": ")" + long_path + "\"}]"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message.rfind("mounts[0].path: too long: 1025 bytes", 0), 0u) << r.error().message;
  // Nested mount paths are fine; /procx is not under /proc.
  auto ok = parse_job_spec_json(spec_with(kImage + R"(, "mounts": [{"dataset": "d", "path": "/data"},
      {"volume": "v", "path": "/data/out"}, {"dataset": "e", "path": "/procx"}])"));
  EXPECT_TRUE(ok.ok()) << ok.error().message;
}

TEST(JobSpecContainer, YamlErrorsNameTheField) {
  auto r = parse_job_spec_yaml("name: j\nqueue: q\ncommand: [x]\ncontainer: {image: i, user: 1000}\n");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message, "container.user: must be a string, got integer (quote it in YAML)");
  r = parse_job_spec_yaml("name: j\nqueue: q\ncommand: [x]\nmounts:\n  - {dataset: d, path: /d}\n");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message.rfind("mounts: need container.image", 0), 0u) << r.error().message;
}

TEST(JobSpecContainer, PathHelpers) {
  EXPECT_EQ(path_problem("/"), "");
  EXPECT_EQ(path_problem("/a/b.c/..d"), "");
  EXPECT_NE(path_problem(""), "");
  EXPECT_NE(path_problem("/a/"), "");
  EXPECT_TRUE(path_within("/mnt/shared", "/mnt/shared"));
  EXPECT_TRUE(path_within("/mnt/shared/x", "/mnt/shared"));
  EXPECT_FALSE(path_within("/mnt/sharedX", "/mnt/shared"));
  EXPECT_FALSE(path_within("/mnt", "/mnt/shared"));
  EXPECT_TRUE(path_within("/anything", "/"));
  EXPECT_TRUE(valid_source_name("a.B_c-1"));
  EXPECT_FALSE(valid_source_name(""));
  EXPECT_FALSE(valid_source_name("a/b"));
  EXPECT_FALSE(valid_source_name(std::string(129, 'a')));
}

}  // namespace
}  // namespace tessera::config
