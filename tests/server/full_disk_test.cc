// A full disk under the store (issue 19, section 3): the server refuses writes with 503 "store full",
// keeps serving reads, never crashes, recovers by itself when space returns, and loses nothing it
// acknowledged. The store lives on a small tmpfs mounted for the test; where mounting is not allowed
// (not root, no CAP_SYS_ADMIN), the test skips and says so.
#include <gtest/gtest.h>
#include <sys/mount.h>

#include <set>

#include "hostile_client.h"
#include "server_process.h"

namespace tessera::testing {
namespace {

class SmallDisk {
 public:
  SmallDisk() : outer_(make_temp_dir("tessera-fulldisk")), mnt_(outer_ + "/mnt") {
    std::filesystem::create_directories(mnt_);
    mounted_ = ::mount("tmpfs", mnt_.c_str(), "tmpfs", 0, "size=1536k,mode=0700") == 0;
    if (!mounted_) why_ = std::string("cannot mount a tmpfs here (") + std::strerror(errno) + "); needs root with CAP_SYS_ADMIN";
  }
  ~SmallDisk() {
    if (mounted_) ::umount2(mnt_.c_str(), MNT_DETACH);
    std::error_code ec;
    std::filesystem::remove_all(outer_, ec);
  }
  bool mounted() const { return mounted_; }
  const std::string& why() const { return why_; }
  std::string dir() const { return mnt_ + "/data"; }
  bool grow(const std::string& size) { return ::mount("tmpfs", mnt_.c_str(), "tmpfs", MS_REMOUNT, ("size=" + size).c_str()) == 0; }

 private:
  std::string outer_, mnt_, why_;
  bool mounted_ = false;
};

TEST(FullDisk, WritesAreRefusedReadsGoOnAndNothingAcknowledgedIsLost) {
  SmallDisk disk;
  if (!disk.mounted()) GTEST_SKIP() << disk.why();
  std::set<int64_t> acknowledged;
  {
    ServerProcess server(TESSERA_SOURCE_DIR "/tests/server/data/e2e_cluster.yaml", disk.dir());
    ASSERT_TRUE(server.start());
    const std::string admin = server.admin_token();
    Json spec = job("fill", "team-a");  // 1 GPU: some start, and their starts are written too
    spec["env"] = Json::object();
    for (int i = 0; i < 20; ++i) spec["env"]["PAD_" + std::to_string(i)] = std::string(400, 'x');  // ~8 KB rows
    int refused = 0;
    std::string refusal;
    for (int i = 0; i < 2000 && refused < 5; ++i) {
      auto r = server.post("/api/v1/jobs", admin, spec);
      if (r.status == 201) {
        acknowledged.insert(r.body["id"].get<int64_t>());
        continue;
      }
      ASSERT_EQ(r.status, 503) << "a full store is 'retry later', not an internal error: " << r.raw;
      refusal = r.body["error"].value("message", "");
      ++refused;
    }
    ASSERT_GT(refused, 0) << "the disk never filled (" << acknowledged.size() << " jobs acknowledged)";
    EXPECT_NE(refusal.find("store full"), std::string::npos) << refusal;
    ASSERT_FALSE(acknowledged.empty());
    // Reads and the periodic work go on while the disk stays full.
    std::this_thread::sleep_for(std::chrono::seconds(2));
    const std::string ended = how_it_ended(server.pid());
    ASSERT_TRUE(ended.empty()) << "the server died on a full disk: " << ended;
    EXPECT_EQ(server.get("/healthz", "").status, 200);
    EXPECT_EQ(server.get("/api/v1/jobs?limit=10", admin).status, 200);
    EXPECT_EQ(server.get("/api/v1/jobs/" + std::to_string(*acknowledged.begin()), admin).status, 200);
    EXPECT_EQ(server.post("/api/v1/jobs", admin, spec).status, 503);
    // Space returns: writes succeed again without a restart.
    ASSERT_TRUE(disk.grow("64m"));
    int64_t after = 0;
    ASSERT_TRUE(eventually([&] {
      auto r = server.post("/api/v1/jobs", admin, spec);
      if (r.status == 201) after = r.body["id"];
      return r.status == 201;
    }, 20));
    acknowledged.insert(after);
    ASSERT_TRUE(process_alive(server.pid()));
    // Nothing acknowledged is lost, across a kill -9 too.
    ASSERT_EQ(server.kill(SIGKILL), SIGKILL);
    ASSERT_TRUE(server.restart());
    for (int64_t id : acknowledged) {
      auto r = server.get("/api/v1/jobs/" + std::to_string(id), admin);
      EXPECT_EQ(r.status, 200) << "acknowledged job " << id << " is gone";
    }
    server.kill(SIGKILL);
  }
}

}  // namespace
}  // namespace tessera::testing
