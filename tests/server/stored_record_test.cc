// The storage form of a job record encoded later, off the state thread (stored_record_encoder in
// server/job_record.h), is the same text as encoding it at once, and it is a snapshot: changes to the
// record after the row was made do not reach what is stored.
#include <gtest/gtest.h>

#include "server/job_record.h"

namespace tessera::server {
namespace {

ClusterState two_nodes() {
  ClusterState c(GpuCatalog::builtin(), NetworkLevels(std::vector<std::string>{}));
  for (const char* name : {"gpu-a", "gpu-b"}) {
    NodeSpec s;
    s.name = name;
    s.cpu = MilliCpu(32000);
    s.memory = MiB(256 * 1024);
    s.gpu_model = "H100-80GB-SXM";
    s.gpu_count = 8;
    EXPECT_TRUE(c.add_node(s).ok());
  }
  return c;
}

JobRecord placed_record() {
  JobRecord r;
  r.id = 42;
  r.spec.name = "train";
  r.spec.command = {"python3", "train.py"};
  r.job.id = JobId(42);
  r.job.user = "alice";
  r.job.state = JobState::kRunning;
  r.job.submitted = 1700000000;
  r.job.started = 1700000010;
  r.job.placement.push_back(TaskPlacement{NodeId(1), MilliCpu(1000), MiB(2048), 1, {GpuGrant{}}});
  r.job.placement.push_back(TaskPlacement{NodeId(0), MilliCpu(1000), MiB(2048), 1, {GpuGrant{}}});
  r.queue_name = "team-a";
  r.attempt = 2;
  r.restarts = 1;
  r.last_nodes = {"gpu-b", "gpu-a"};
  r.resume_from = "/ckpt/42/step-100";
  r.signal_seq = 3;
  r.signal_name = "SIGUSR1";
  r.submitted_ms = 1700000000123;
  r.started_ms = 1700000010456;
  r.tasks.resize(2);  // not stored
  return r;
}

TEST(StoredRecord, EncodedLaterIsTheSameTextAsEncodedNow) {
  const ClusterState c = two_nodes();
  JobRecord r = placed_record();
  const std::string now = record_to_json(r, c).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  auto later = stored_record_encoder(r, c);
  r.attempt = 3;  // after the row was made: not in it
  r.job.placement.clear();
  const std::string text = later();
  EXPECT_EQ(text, now);
  const auto j = nlohmann::json::parse(text);
  EXPECT_EQ(j["placement"][0]["node"], "gpu-b");
  EXPECT_EQ(j["placement"][1]["node"], "gpu-a");
  EXPECT_EQ(j["attempt"], 2);
  EXPECT_EQ(later(), now);  // may be called again (a group retried batch by batch)
}

}  // namespace
}  // namespace tessera::server
