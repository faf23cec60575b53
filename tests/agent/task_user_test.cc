// Task users (task_user.h): NAME or UID:GID, never root; the per-user/per-queue map file; the
// thread-scoped file-system identity; link-safe tree removal. The identity tests need root (CI runs
// as root) and are skipped otherwise.
#include "agent/task_user.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace tessera::agent {
namespace {
namespace fs = std::filesystem;

class TaskUserTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/tessera-task-user-test-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  std::string write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ / name) << text;
    return (dir_ / name).string();
  }
  fs::path dir_;
};

TEST(TaskUser, NumbersAndNames) {
  auto u = parse_task_user("2001:3001", "--task-user");
  ASSERT_TRUE(u.ok()) << u.error().message;
  EXPECT_EQ(u->uid, 2001u);
  EXPECT_EQ(u->gid, 3001u);
  EXPECT_EQ(u->groups, std::vector<gid_t>{3001});
  auto nobody = parse_task_user("nobody", "--task-user");
  ASSERT_TRUE(nobody.ok()) << nobody.error().message;  // Debian has it
  EXPECT_NE(nobody->uid, 0u);
  EXPECT_TRUE(nobody->home.empty()) << nobody->home;  // /nonexistent is not a usable home
  auto missing = parse_task_user("no-such-user-xyz", "--task-user");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message.find("no-such-user-xyz"), std::string::npos);
  for (const char* bad : {"", "12", "a:b", "1:", ":1", "-1:5", "99999999999:1", "1:2:3"}) {
    auto r = parse_task_user(bad, "--task-user");
    EXPECT_FALSE(r.ok()) << bad;
    if (!r.ok()) {
      EXPECT_NE(r.error().message.find("--task-user"), std::string::npos) << r.error().message;
    }
  }
}

TEST(TaskUser, RootIsRefused) {
  for (const char* root : {"root", "0:0", "0:1000", "1000:0"}) {
    auto r = parse_task_user(root, "--task-user");
    ASSERT_FALSE(r.ok()) << root;
    EXPECT_NE(r.error().message.find("never run"), std::string::npos) << r.error().message;
  }
}

TEST_F(TaskUserTest, MapFileChoosesByUserThenQueueThenDefault) {
  auto m = load_task_user_map(write("map.yaml", "default: '4000:4000'\nusers: {alice: '3001:3001'}\nqueues:\n  team-a: '2001:2001'\n"));
  ASSERT_TRUE(m.ok()) << m.error().message;
  EXPECT_EQ(m->pick("alice", "team-a")->uid, 3001u);
  EXPECT_EQ(m->pick("bob", "team-a")->uid, 2001u);
  EXPECT_EQ(m->pick("bob", "")->uid, 4000u);
  EXPECT_EQ(m->pick("", "")->uid, 4000u);
  EXPECT_EQ(m->all().size(), 3u);
  // JSON is YAML too.
  auto j = load_task_user_map(write("map.json", R"({"users": {"carol": "nobody"}})"));
  ASSERT_TRUE(j.ok()) << j.error().message;
  EXPECT_FALSE(j->fallback.has_value());  // the agent's --task-user or nobody fills it
  EXPECT_EQ(j->pick("carol", "")->name, "nobody");
}

TEST_F(TaskUserTest, MapFileToRootOrMalformedIsRefusedNamingTheEntry) {
  auto root = load_task_user_map(write("root.yaml", "queues: {ops: root}\n"));
  ASSERT_FALSE(root.ok());
  EXPECT_NE(root.error().message.find("queues.ops"), std::string::npos) << root.error().message;
  EXPECT_NE(root.error().message.find("root"), std::string::npos);
  auto zero = load_task_user_map(write("zero.yaml", "users: {mallory: '0:0'}\n"));
  ASSERT_FALSE(zero.ok());
  EXPECT_NE(zero.error().message.find("users.mallory"), std::string::npos) << zero.error().message;
  auto typo = load_task_user_map(write("typo.yaml", "user: {alice: nobody}\n"));
  ASSERT_FALSE(typo.ok());
  EXPECT_NE(typo.error().message.find("unknown key \"user\""), std::string::npos) << typo.error().message;
  EXPECT_FALSE(load_task_user_map(write("list.yaml", "- a\n- b\n")).ok());
  EXPECT_FALSE(load_task_user_map(write("nested.yaml", "users: {alice: [1, 2]}\n")).ok());
  EXPECT_FALSE(load_task_user_map(write("bad.yaml", "users: {alice: nobody\n")).ok());
  EXPECT_FALSE(load_task_user_map((dir_ / "missing.yaml").string()).ok());
}

TEST_F(TaskUserTest, AgentFlagsMakeTheMap) {
  if (!can_switch_users()) {
    // Not root: tasks run as the agent; naming another user cannot be honoured.
    EXPECT_FALSE(make_task_user_map("2001:2001", "").ok());
    auto self = make_task_user_map("", "");
    ASSERT_TRUE(self.ok());
    EXPECT_FALSE(self->pick("x", "y").has_value());
    return;
  }
  auto def = make_task_user_map("", "");
  ASSERT_TRUE(def.ok()) << def.error().message;
  ASSERT_TRUE(def->fallback.has_value());
  EXPECT_EQ(def->fallback->uid, 65534u);  // nobody
  auto flag = make_task_user_map("2001:2001", write("m.yaml", "default: '4000:4000'\nusers: {alice: '3001:3001'}\n"));
  ASSERT_TRUE(flag.ok()) << flag.error().message;
  EXPECT_EQ(flag->pick("bob", "")->uid, 2001u);  // --task-user is the default over the file's
  EXPECT_EQ(flag->pick("alice", "")->uid, 3001u);
  auto root = make_task_user_map("root", "");
  ASSERT_FALSE(root.ok());
  EXPECT_NE(root.error().message.find("never run as root"), std::string::npos) << root.error().message;
}

TEST_F(TaskUserTest, ScopedFsUserChecksFilesAsTheTaskUser) {
  if (!can_switch_users()) GTEST_SKIP() << "needs root";
  const std::string secret = write("secret", "s3cret\n");
  ASSERT_EQ(::chmod(secret.c_str(), 0640), 0);  // root:root, group-readable: root's group must not leak
  ASSERT_EQ(::chmod(dir_.c_str(), 0755), 0);
  auto nobody = parse_task_user("65534:65534", "test").value();
  {
    ScopedFsUser as(nobody);
    errno = 0;
    EXPECT_LT(::open(secret.c_str(), O_RDONLY), 0);
    EXPECT_EQ(errno, EACCES);
    EXPECT_NE(::mkdir((dir_ / "made").c_str(), 0755), 0);  // no write access to a root-owned 0755 dir
    EXPECT_EQ(errno, EACCES);
  }
  const int fd = ::open(secret.c_str(), O_RDONLY);  // the agent again
  EXPECT_GE(fd, 0);
  if (fd >= 0) ::close(fd);
  // A directory the user owns: what is made there is the user's.
  ASSERT_EQ(::mkdir((dir_ / "mine").c_str(), 0700), 0);
  ASSERT_EQ(::chown((dir_ / "mine").c_str(), 65534, 65534), 0);
  {
    ScopedFsUser as(nobody);
    std::ofstream(dir_ / "mine" / "f") << "x";
  }
  struct stat st{};
  ASSERT_EQ(::stat((dir_ / "mine" / "f").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 65534u);
  EXPECT_EQ(::geteuid(), 0u);
}

TEST_F(TaskUserTest, RemoveTreeFollowsNoLink) {
  const std::string outside = write("outside", "keep me\n");
  fs::create_directories(dir_ / "tree" / "a" / "b");
  std::ofstream(dir_ / "tree" / "a" / "b" / "f") << "x";
  fs::create_symlink(dir_, dir_ / "tree" / "a" / "up");   // a link to a directory above
  fs::create_symlink(outside, dir_ / "tree" / "link");    // a link to a file outside
  ASSERT_EQ(::chmod((dir_ / "tree" / "a" / "b").c_str(), 0500), 0);  // not writable: removed anyway
  ASSERT_TRUE(remove_tree((dir_ / "tree").string()).ok());
  EXPECT_FALSE(fs::exists(dir_ / "tree"));
  EXPECT_TRUE(fs::exists(outside));
  EXPECT_TRUE(remove_tree((dir_ / "tree").string()).ok());  // gone already: fine
}

TEST_F(TaskUserTest, TaskOwnedDirRefusesALinkAndReowns) {
  fs::create_symlink("/etc", dir_ / "evil");
  EXPECT_FALSE(make_task_owned_dir((dir_ / "evil").string(), std::nullopt).ok());
  ASSERT_TRUE(make_private_dir((dir_ / "root").string(), 0711).ok());
  struct stat st{};
  ASSERT_EQ(::stat((dir_ / "root").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0711u);
  if (!can_switch_users()) return;
  auto u = parse_task_user("4242:4243", "test").value();
  const std::string d = (dir_ / "root" / "job").string();
  ASSERT_TRUE(make_task_owned_dir(d, u).ok());
  ASSERT_EQ(::stat(d.c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 4242u);
  EXPECT_EQ(st.st_gid, 4243u);
  EXPECT_EQ(st.st_mode & 07777, 0700u);
}

}  // namespace
}  // namespace tessera::agent
