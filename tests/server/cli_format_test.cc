// Unit tests of the CLI's pure helpers (src/cli/format.h): tables, durations and ETAs, GPU amounts
// and class maps, the node GPU/MIG map, resources in words, server URLs, query encoding, duration
// flags, mount flags and server error messages. No server, no I/O.
#include "cli/format.h"

#include <gtest/gtest.h>

namespace tessera::cli {
namespace {

using nlohmann::json;

TEST(CliTable, ColumnsAreAsWideAsTheirWidestCell) {
  Table t;
  t.headers = {"ID", "NAME", "STATE"};
  t.right_align = {true, false, false};
  t.rows = {{"7", "bert-large", "pending"}, {"123", "x", "running"}};
  EXPECT_EQ(render_table(t),
            " ID  NAME        STATE\n"
            "  7  bert-large  pending\n"
            "123  x           running\n");
}

TEST(CliTable, NoTrailingSpacesAndShortRowsArePadded) {
  Table t;
  t.headers = {"A", "B", "C"};
  t.rows = {{"long-value"}, {"x", "", ""}};
  const auto lines = render_table_lines(t);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0], "A           B  C");
  EXPECT_EQ(lines[1], "long-value");
  EXPECT_EQ(lines[2], "x");
}

TEST(CliTable, WidthCountsCodePointsNotBytes) {
  Table t;
  t.headers = {"N", "X"};
  t.rows = {{"\xc3\xa9t\xc3\xa9", "1"}, {"abcd", "2"}};  // "été" is 3 code points
  const auto lines = render_table_lines(t);
  EXPECT_EQ(lines[1], "\xc3\xa9t\xc3\xa9   1");
  EXPECT_EQ(lines[2], "abcd  2");
}

TEST(CliFormat, Truncate) {
  EXPECT_EQ(truncate("short", 10), "short");
  EXPECT_EQ(truncate("waiting for 32 GPUs", 10), "waiting...");
  EXPECT_EQ(truncate("exactly10!", 10), "exactly10!");
}

TEST(CliFormat, Durations) {
  EXPECT_EQ(format_duration_short(-5), "0s");
  EXPECT_EQ(format_duration_short(45), "45s");
  EXPECT_EQ(format_duration_short(12 * 60 + 30), "12m");
  EXPECT_EQ(format_duration_short(3 * 3600), "3h");
  EXPECT_EQ(format_duration_short(3 * 3600 + 20 * 60), "3h20m");
  EXPECT_EQ(format_duration_short(2 * 86400), "2d");
  EXPECT_EQ(format_duration_short(2 * 86400 + 4 * 3600 + 59), "2d4h");
}

TEST(CliFormat, RelativeTimesAndEta) {
  const int64_t now = 1'764'720'000;
  EXPECT_EQ(format_relative(now + 720, now), "in 12m");
  EXPECT_EQ(format_relative(now - 3 * 3600, now), "3h ago");
  EXPECT_EQ(format_relative(now + 1, now), "now");
  EXPECT_EQ(format_eta(std::nullopt, now), "-");
  EXPECT_EQ(format_eta(now - 10, now), "now");
  EXPECT_EQ(format_eta(now + 90 * 60, now), "in 1h30m");
  EXPECT_EQ(format_local_time(0), "-");
}

TEST(CliFormat, GpuAmounts) {
  EXPECT_EQ(format_gpus(16000), "16");
  EXPECT_EQ(format_gpus(500), "0.5");
  EXPECT_EQ(format_gpus(1250), "1.3");
  EXPECT_EQ(format_gpus(1240), "1.2");
  EXPECT_EQ(format_gpus(0), "0");
  EXPECT_EQ(format_gpus(40), "0");
  EXPECT_EQ(format_cores(32000), "32");
  EXPECT_EQ(format_cores(500), "0.5");
}

TEST(CliFormat, ClassNamesShortenUnlessAmbiguous) {
  const std::vector<std::string> all = {"H100-80GB-SXM", "A100-40GB", "A100-80GB"};
  EXPECT_EQ(short_gpu_class("H100-80GB-SXM", all), "h100");
  EXPECT_EQ(short_gpu_class("A100-40GB", all), "a100-40gb");
  EXPECT_EQ(short_gpu_class("T4", all), "t4");
  EXPECT_EQ(format_class_amounts(json{{"H100-80GB-SXM", 16000}, {"A100-80GB", 1500}}, all), "a100-80gb:1.5 h100:16");
  EXPECT_EQ(format_class_amounts(json::object(), all), "-");
  EXPECT_EQ(format_class_amounts(json(), all), "-");
}

TEST(CliFormat, Memory) {
  EXPECT_EQ(format_mib(0), "0");
  EXPECT_EQ(format_mib(512), "512Mi");
  EXPECT_EQ(format_mib(65536), "64Gi");
  EXPECT_EQ(format_mib(512000), "500Gi");
  EXPECT_EQ(format_mib(1536 * 1024), "1.5Ti");
}

TEST(CliFormat, GpuMap) {
  const json gpus = json::parse(R"([
    {"index": 0, "health": "healthy", "mig": false, "used_milli": 1000},
    {"index": 1, "health": "healthy", "mig": false, "used_milli": 500},
    {"index": 2, "health": "healthy", "mig": false, "used_milli": 0},
    {"index": 3, "health": "failed", "mig": false, "used_milli": 0},
    {"index": 4, "health": "healthy", "mig": true, "used_milli": 0,
     "instances": [{"profile": "3g.40gb", "start": 4, "job": 17}, {"profile": "1g.10gb", "start": 0, "job": null}]},
    {"index": 5, "health": "healthy", "mig": true, "instances": []}])");
  EXPECT_EQ(render_gpu_map(gpus), "[#+.x] [3g:17|1g:-] [-]");
  EXPECT_EQ(render_gpu_map(json::array()), "-");
  EXPECT_EQ(render_gpu_map(json::parse(R"([{"mig": true, "instances": [{"profile": "7g.80gb", "job": 3}]}])")), "[7g:3]");
}

TEST(CliFormat, ResourcesInWords) {
  EXPECT_EQ(describe_resources(json::parse(
                R"({"gpus": 8, "gpu_models": ["H100-80GB-SXM"], "cpu": "32000m", "memory": 262144})")),
            "8 GPUs (H100-80GB-SXM), 32 cpu, 256Gi memory");
  EXPECT_EQ(describe_resources(json::parse(R"({"mig": "3g.40gb", "cpu": 4})")), "MIG 3g.40gb, 4 cpu");
  EXPECT_EQ(describe_resources(json::parse(R"({"gpus": 1, "gpu_milli": 500, "gpu_memory": 20480, "cpu": "500m"})")),
            "0.5 of 1 GPU, 20Gi GPU memory, 0.5 cpu");
  EXPECT_EQ(describe_resources(json::parse(R"({"gpus": 0, "cpu": 2, "memory": "4Gi"})")), "no GPU, 2 cpu, 4Gi memory");
}

TEST(CliFormat, ServerUrls) {
  auto u = parse_server_url("http://127.0.0.1:8420");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->host, "127.0.0.1");
  EXPECT_EQ(u->port, 8420);
  EXPECT_EQ(u->base(), "http://127.0.0.1:8420");
  EXPECT_EQ(parse_server_url("ctl.example.com")->base(), "http://ctl.example.com:8420");
  EXPECT_EQ(parse_server_url("ctl:9000/")->base(), "http://ctl:9000");
  EXPECT_EQ(parse_server_url("https://ctl:443")->base(), "https://ctl:443");
  EXPECT_EQ(parse_server_url("http://[::1]:8420")->base(), "http://[::1]:8420");
  for (const char* bad : {"", "http://", "ftp://x:1", "http://x:0", "http://x:99999", "http://x:80a", "http://x/api",
                          "http://[::1"}) {
    auto r = parse_server_url(bad);
    EXPECT_FALSE(r.ok()) << bad;
    if (!r.ok()) {
      EXPECT_NE(r.error().message.find("--server"), std::string::npos) << r.error().message;
    }
  }
}

TEST(CliFormat, UrlEncode) {
  EXPECT_EQ(url_encode("team-a"), "team-a");
  EXPECT_EQ(url_encode("org/team a"), "org%2Fteam%20a");
  EXPECT_EQ(url_encode("pending,running"), "pending%2Crunning");
}

TEST(CliFormat, DurationFlags) {
  EXPECT_EQ(*parse_duration_flag("3600", "--max-runtime"), 3600);
  EXPECT_EQ(*parse_duration_flag("90m", "--max-runtime"), 5400);
  EXPECT_EQ(*parse_duration_flag("2h", "--max-runtime"), 7200);
  EXPECT_EQ(*parse_duration_flag("1d", "--max-runtime"), 86400);
  EXPECT_EQ(*parse_duration_flag("30s", "--max-runtime"), 30);
  for (const char* bad : {"", "h", "-5", "2x", "1.5h", "99999999999999999999"}) {
    auto r = parse_duration_flag(bad, "--expected-runtime");
    EXPECT_FALSE(r.ok()) << bad;
    if (!r.ok()) {
      EXPECT_EQ(r.error().message.rfind("--expected-runtime: ", 0), 0u) << r.error().message;
    }
  }
}

TEST(CliFormat, MountFlags) {
  EXPECT_EQ(*parse_mount_flag("dataset=imagenet:/data"), json::parse(R"({"dataset": "imagenet", "path": "/data", "read_only": null})"));
  EXPECT_EQ(*parse_mount_flag("volume=team-scratch:/scratch:rw"),
            json::parse(R"({"volume": "team-scratch", "path": "/scratch", "read_only": false})"));
  EXPECT_EQ(*parse_mount_flag("host=/mnt/shared/x:/x:ro"), json::parse(R"({"host_path": "/mnt/shared/x", "path": "/x", "read_only": true})"));
  // PATH is checked by the job spec parser, not here.
  EXPECT_EQ(*parse_mount_flag("dataset=d:data"), json::parse(R"({"dataset": "d", "path": "data", "read_only": null})"));
  for (const char* bad : {"", "imagenet:/data", "bucket=x:/data", "dataset=imagenet", "dataset=imagenet:ro", "dataset=:/data",
                          "dataset=imagenet:", "host_path=/a:/b", "=x:/y"}) {
    auto r = parse_mount_flag(bad);
    EXPECT_FALSE(r.ok()) << bad;
    if (!r.ok()) {
      EXPECT_EQ(r.error().message.rfind("--mount '" + std::string(bad) + "': ", 0), 0u) << r.error().message;
      EXPECT_NE(r.error().message.find("expected KIND=SOURCE:PATH[:ro|:rw]"), std::string::npos) << r.error().message;
    }
  }
}

TEST(CliFormat, ServerErrors) {
  EXPECT_EQ(format_server_error(400, R"({"error": {"code": "invalid_argument", "message": "resources.gpus: must be >= 0", "field": "resources.gpus"}})"),
            "server said 400 invalid_argument: resources.gpus: must be >= 0 (field resources.gpus)");
  EXPECT_EQ(format_server_error(403, R"({"error": {"code": "permission_denied", "message": "viewers may only read"}})"),
            "server said 403 permission_denied: viewers may only read");
  EXPECT_EQ(format_server_error(502, "Bad gateway\n"), "server said 502: Bad gateway");
  EXPECT_EQ(format_server_error(404, ""), "server said 404: not found");
}

TEST(CliFormat, JsonAccess) {
  const json j = json::parse(R"({"s": "x", "i": 17, "d": 1.25, "b": true, "n": null})");
  EXPECT_EQ(json_text(j, "s"), "x");
  EXPECT_EQ(json_text(j, "i"), "17");
  EXPECT_EQ(json_text(j, "d"), "1.3");
  EXPECT_EQ(json_text(j, "b"), "yes");
  EXPECT_EQ(json_text(j, "n"), "-");
  EXPECT_EQ(json_text(j, "missing", "?"), "?");
  EXPECT_EQ(json_int(j, "i"), 17);
  EXPECT_EQ(json_int(j, "s"), std::nullopt);
  EXPECT_EQ(json_int(j, "n"), std::nullopt);
}

// Events show a placement as words, whole, not as a JSON array cut off at the column's width.
TEST(CliEvents, APlacementReadsAsTasksOnNodes) {
  const json started = {{"attempt", 2},
                        {"placement", json::array({json{{"task", 0}, {"node", "n-3"}, {"gpus", {0, 1}}},
                                                   json{{"task", 1}, {"node", "n-4"}, {"gpus", {5}}}})}};
  EXPECT_EQ(compact_detail(started), "attempt=2 placement=task 0 on n-3 GPUs 0,1; task 1 on n-4 GPU 5");
  json big = json::array();
  for (int t = 0; t < 16; ++t) big.push_back(json{{"task", t}, {"node", t < 8 ? "a" : "b"}, {"gpus", {t % 8}}});
  EXPECT_EQ(compact_detail(json{{"placement", big}}), "placement=16 tasks on 2 nodes: a (8), b (8)");
  EXPECT_EQ(compact_detail(json(R"({"reason": "cancelled by alice"})")), "reason=cancelled by alice");
}

}  // namespace
}  // namespace tessera::cli
