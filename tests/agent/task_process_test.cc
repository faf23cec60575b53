// TaskProcess against real processes: argv without a shell, exact environment, working directory,
// log file, exit codes, process-group signals, terminate with grace, cgroup support, checkpoint files,
// and (as root, which CI is) the task's user: never root, no access to the agent's files.
#include "agent/task_process.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

namespace tessera::agent {
namespace {
namespace fs = std::filesystem;
using namespace std::chrono_literals;

std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Polls until the process exits or `timeout` passes.
std::optional<int> wait_exit(TaskProcess& p, std::chrono::milliseconds timeout = 1500ms) {
  auto until = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < until) {
    if (auto c = p.poll()) return c;
    std::this_thread::sleep_for(5ms);
  }
  return p.poll();
}

// Polls until `pred` holds or `timeout` passes.
template <class F>
bool eventually(F pred, std::chrono::milliseconds timeout = 1500ms) {
  auto until = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < until) {
    if (pred()) return true;
    std::this_thread::sleep_for(5ms);
  }
  return pred();
}

// Gone or a zombie (an orphan's reaper may be slow or absent in containers).
bool process_gone(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  if (!in) return true;
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto close = stat.rfind(')');
  return close != std::string::npos && close + 2 < stat.size() && stat[close + 2] == 'Z';
}

pid_t read_pid(const fs::path& p) {
  std::ifstream in(p);
  pid_t pid = -1;
  in >> pid;
  return pid;
}

class TaskProcessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/tessera-task-test-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  TaskLaunch launch(std::vector<std::string> argv) {
    TaskLaunch l;
    l.argv = std::move(argv);
    l.env = {{"PATH", "/usr/bin:/bin"}};
    l.log_path = (dir_ / "logs" / "task.log").string();
    return l;
  }
  std::string log() { return slurp(dir_ / "logs" / "task.log"); }
  // Runs to completion and returns the exit code (-1 when it did not finish in time).
  int run(const TaskLaunch& l) {
    auto p = TaskProcess::start(l);
    EXPECT_TRUE(p.ok()) << (p.ok() ? "" : p.error().message);
    if (!p.ok()) return -1;
    return wait_exit(*p).value_or(-1);
  }
  fs::path dir_;
};

TEST_F(TaskProcessTest, ArgvIsPassedVerbatimWithoutAShell) {
  auto l = launch({"printf", "[%s]\\n", "a b", "$HOME", "*", "'q'"});
  EXPECT_EQ(run(l), 0);
  EXPECT_EQ(log(), "[a b]\n[$HOME]\n[*]\n['q']\n");
}

TEST_F(TaskProcessTest, EnvironmentIsExactlyTheGivenOne) {
  auto l = launch({"/usr/bin/env"});
  l.env = {{"FOO", "bar"}, {"X", "1 2"}};
  EXPECT_EQ(run(l), 0);
  EXPECT_EQ(log(), "FOO=bar\nX=1 2\n");
}

TEST_F(TaskProcessTest, PathSearchFallsBackToTheAgentsPath) {
  auto l = launch({"echo", "hi"});
  l.env = {{"ONLY", "1"}};
  EXPECT_EQ(run(l), 0);
  EXPECT_EQ(log(), "hi\n");
}

TEST_F(TaskProcessTest, WorkingDirectoryIsApplied) {
  fs::create_directories(dir_ / "work");
  auto l = launch({"/bin/pwd"});
  l.working_dir = (dir_ / "work").string();
  EXPECT_EQ(run(l), 0);
  EXPECT_EQ(log(), fs::canonical(dir_ / "work").string() + "\n");
}

TEST_F(TaskProcessTest, RelativeCommandIsFoundInTheWorkingDirectory) {
  fs::create_directories(dir_ / "work");
  std::ofstream(dir_ / "work" / "run.sh") << "#!/bin/sh\necho ran \"$1\"\n";
  fs::permissions(dir_ / "work" / "run.sh", fs::perms::owner_all);
  auto l = launch({"./run.sh", "x y"});
  l.working_dir = (dir_ / "work").string();
  EXPECT_EQ(run(l), 0);
  EXPECT_EQ(log(), "ran x y\n");
}

TEST_F(TaskProcessTest, ChildGetsCleanFdsSignalsAndDevNullStdin) {
  // The agent's own state that must not leak: an inheritable fd, an ignored and a blocked signal.
  int leaked = ::open("/dev/null", O_RDONLY);  // no O_CLOEXEC
  ASSERT_GE(leaked, 3);
  struct sigaction old_ign{};
  struct sigaction ign{};
  ign.sa_handler = SIG_IGN;
  ::sigaction(SIGUSR2, &ign, &old_ign);
  sigset_t block, old_mask;
  sigemptyset(&block);
  sigaddset(&block, SIGHUP);
  ::pthread_sigmask(SIG_BLOCK, &block, &old_mask);

  auto l = launch({"/bin/sh", "-c",
                   "grep -E '^Sig(Blk|Ign)' /proc/self/status; readlink /proc/self/fd/0; "
                   "{ echo x >&" + std::to_string(leaked) + "; } 2>/dev/null && echo leaked || echo closed"});
  int code = run(l);
  ::close(leaked);
  ::sigaction(SIGUSR2, &old_ign, nullptr);
  ::pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
  EXPECT_EQ(code, 0);
  EXPECT_EQ(log(), "SigBlk:\t0000000000000000\nSigIgn:\t0000000000000000\n/dev/null\nclosed\n");
}

TEST_F(TaskProcessTest, StdoutAndStderrAppendedAcrossRuns) {
  auto l = launch({"/bin/sh", "-c", "echo out; echo err >&2; cat; echo done"});
  EXPECT_EQ(run(l), 0);  // stdin is /dev/null: cat ends at once
  EXPECT_EQ(run(l), 0);
  EXPECT_EQ(log(), "out\nerr\ndone\nout\nerr\ndone\n");
  struct stat st{};
  ASSERT_EQ(::stat(l.log_path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);  // logs may hold secrets: the agent's alone
}

TEST_F(TaskProcessTest, ExitCodes) {
  EXPECT_EQ(run(launch({"/bin/sh", "-c", "exit 0"})), 0);
  EXPECT_EQ(run(launch({"/bin/sh", "-c", "exit 3"})), 3);
  EXPECT_EQ(run(launch({"/bin/sh", "-c", "kill -9 $$"})), 128 + 9);

  auto p = TaskProcess::start(launch({"/bin/sleep", "10"}));
  ASSERT_TRUE(p.ok());
  EXPECT_FALSE(p->exited());
  p->kill_now();
  EXPECT_EQ(wait_exit(*p), 137);
  EXPECT_TRUE(p->exited());
  EXPECT_EQ(p->poll(), 137);  // remembered
}

TEST_F(TaskProcessTest, UnknownExecutableIsAnErrorNamingIt) {
  auto p = TaskProcess::start(launch({"no-such-program-xyz", "arg"}));
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.error().message.find("command[0] \"no-such-program-xyz\": not found in PATH"), std::string::npos)
      << p.error().message;
  EXPECT_NE(p.error().message.find("/usr/bin:/bin"), std::string::npos) << p.error().message;

  auto q = TaskProcess::start(launch({"/no/such/file"}));
  ASSERT_FALSE(q.ok());
  EXPECT_NE(q.error().message.find("/no/such/file"), std::string::npos);
}

TEST_F(TaskProcessTest, ExecFailureInTheChildIsReportedOverThePipe) {
  // Executable bit but no valid format: execve fails with ENOEXEC in the child.
  fs::path bad = dir_ / "bad";
  std::ofstream(bad) << "this is not a program\n";
  fs::permissions(bad, fs::perms::owner_all);
  auto p = TaskProcess::start(launch({bad.string()}));
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.error().message.find("exec failed"), std::string::npos) << p.error().message;
  EXPECT_NE(p.error().message.find("bad"), std::string::npos) << p.error().message;
}

TEST_F(TaskProcessTest, MissingWorkingDirOrEmptyArgvIsAnError) {
  auto l = launch({"/bin/true"});
  l.working_dir = (dir_ / "nope").string();
  auto p = TaskProcess::start(l);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.error().message.find("nope"), std::string::npos) << p.error().message;

  EXPECT_FALSE(TaskProcess::start(launch({})).ok());
}

TEST_F(TaskProcessTest, SignalReachesGrandchildren) {
  fs::path pidfile = dir_ / "child.pid";
  auto p = TaskProcess::start(
      launch({"/bin/sh", "-c", "sleep 1000 & echo $! > " + pidfile.string() + "; wait"}));
  ASSERT_TRUE(p.ok());
  ASSERT_TRUE(eventually([&] { return read_pid(pidfile) > 0; }));
  pid_t grandchild = read_pid(pidfile);
  EXPECT_EQ(::getpgid(grandchild), p->pid());  // same group as the task
  p->signal(SIGTERM);
  EXPECT_EQ(wait_exit(*p), 128 + SIGTERM);
  EXPECT_TRUE(eventually([&] { return process_gone(grandchild); }));
}

TEST_F(TaskProcessTest, TerminateKillsATermIgnoringTreeAfterGrace) {
  fs::path pidfile = dir_ / "child.pid";
  auto p = TaskProcess::start(
      launch({"/bin/sh", "-c", "trap '' TERM; sleep 1000 & echo $! > " + pidfile.string() + "; wait"}));
  ASSERT_TRUE(p.ok());
  ASSERT_TRUE(eventually([&] { return read_pid(pidfile) > 0; }));
  pid_t grandchild = read_pid(pidfile);
  auto t0 = std::chrono::steady_clock::now();
  p->terminate(1);
  EXPECT_TRUE(p->terminating());
  std::this_thread::sleep_for(200ms);
  p->tick();
  EXPECT_FALSE(p->exited());  // TERM is ignored; KILL not yet due
  std::optional<int> code;
  EXPECT_TRUE(eventually([&] {
    p->tick();
    code = p->poll();
    return code.has_value();
  }));
  EXPECT_GE(std::chrono::steady_clock::now() - t0, 950ms);
  EXPECT_EQ(code, 137);
  EXPECT_TRUE(eventually([&] { return process_gone(grandchild); }));
}

TEST_F(TaskProcessTest, TerminateKillsGroupMembersLeftAfterTheLeaderExited) {
  fs::path pidfile = dir_ / "child.pid";
  auto p = TaskProcess::start(
      launch({"/bin/sh", "-c", "trap '' TERM; sleep 1000 & echo $! > " + pidfile.string()}));
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(wait_exit(*p), 0);
  pid_t grandchild = read_pid(pidfile);
  ASSERT_GT(grandchild, 0);
  EXPECT_FALSE(process_gone(grandchild));
  p->terminate(0);
  p->tick();
  EXPECT_TRUE(eventually([&] { return process_gone(grandchild); }));
}

TEST_F(TaskProcessTest, Usr1ReachesAShellTrap) {
  fs::path got = dir_ / "got";
  fs::path ready = dir_ / "ready";
  auto p = TaskProcess::start(launch({"/bin/sh", "-c",
                                      "trap 'echo got >> " + got.string() + "' USR1; echo > " + ready.string() +
                                          "; while :; do sleep 0.02; done"}));
  ASSERT_TRUE(p.ok());
  ASSERT_TRUE(eventually([&] { return fs::exists(ready); }));
  p->signal(SIGUSR1);
  EXPECT_TRUE(eventually([&] { return slurp(got) == "got\n"; })) << slurp(got);
  EXPECT_FALSE(p->exited());
  p->kill_now();
  EXPECT_EQ(wait_exit(*p), 137);
  p->signal(SIGTERM);  // no-op once exited
}

TEST_F(TaskProcessTest, MovedFromObjectIsInert) {
  auto started = TaskProcess::start(launch({"/bin/sleep", "10"}));
  ASSERT_TRUE(started.ok());
  TaskProcess a = std::move(*started);
  pid_t pid = a.pid();
  ASSERT_GT(pid, 0);
  {
    TaskProcess b = std::move(a);
    EXPECT_EQ(a.pid(), -1);
    EXPECT_FALSE(a.poll().has_value());
    a.kill_now();  // no-op on the moved-from object
    EXPECT_FALSE(b.exited());
    TaskProcess c = TaskProcess::start(launch({"/bin/true"})).value();
    c = std::move(b);
    EXPECT_EQ(c.pid(), pid);
    c.kill_now();
    EXPECT_EQ(wait_exit(c), 137);
  }
}

TEST_F(TaskProcessTest, RunsAsTheGivenUserWithItsGroupsOnly) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to switch users";
  auto l = launch({"/bin/sh", "-c", "id -u; id -g; id -G"});
  l.user = parse_task_user("4242:4343", "test").value();
  EXPECT_EQ(run(l), 0);
  EXPECT_EQ(log(), "4242\n4343\n4343\n");  // not 0, and no supplementary group of the agent
  auto n = launch({"/bin/sh", "-c", "id -u"});
  n.log_path = (dir_ / "logs" / "nobody.log").string();
  n.user = parse_task_user("nobody", "test").value();
  EXPECT_EQ(run(n), 0);
  EXPECT_EQ(slurp(dir_ / "logs" / "nobody.log"), std::to_string(n.user->uid) + "\n");
  EXPECT_NE(n.user->uid, 0u);
}

TEST_F(TaskProcessTest, TaskCannotReadTheAgentsFiles) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to switch users";
  ASSERT_EQ(::chmod(dir_.c_str(), 0755), 0);  // only the file's own mode protects it
  const fs::path secret = dir_ / "agent.token";
  std::ofstream(secret) << "token\n";
  ASSERT_EQ(::chmod(secret.c_str(), 0600), 0);
  auto l = launch({"/bin/cat", secret.string()});
  EXPECT_EQ(run(l), 0);  // the agent itself can
  EXPECT_EQ(log(), "token\n");
  l.user = parse_task_user("nobody", "test").value();
  EXPECT_EQ(run(l), 1);
  EXPECT_NE(log().find("Permission denied"), std::string::npos) << log();
  EXPECT_EQ(log().find("token\ntoken"), std::string::npos);
}

TEST_F(TaskProcessTest, RootUserIsRefusedAndUnreachableDirsAreErrors) {
  auto l = launch({"/bin/true"});
  l.user = TaskUser{0, 0, "root", "", {0}};
  auto p = TaskProcess::start(l);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.error().message.find("never run as root"), std::string::npos) << p.error().message;
  if (::geteuid() != 0) return;
  fs::create_directories(dir_ / "private");  // dir_ is 0700 root: nobody cannot enter
  l.user = parse_task_user("nobody", "test").value();
  l.working_dir = (dir_ / "private").string();
  p = TaskProcess::start(l);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.error().message.find("nobody can reach"), std::string::npos) << p.error().message;
  // An executable the user cannot reach is named too.
  l.working_dir.clear();
  std::ofstream(dir_ / "run.sh") << "#!/bin/sh\necho ran\n";
  fs::permissions(dir_ / "run.sh", fs::perms::owner_all);
  l.argv = {(dir_ / "run.sh").string()};
  p = TaskProcess::start(l);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.error().message.find("run.sh"), std::string::npos) << p.error().message;
}

TEST_F(TaskProcessTest, CheckpointFilesAreTouchedAsTheTaskUser) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to switch users";
  ASSERT_EQ(::chmod(dir_.c_str(), 0755), 0);
  const auto nobody = parse_task_user("nobody", "test").value();
  const fs::path ck = dir_ / "ckpt";
  fs::create_directories(ck);
  ASSERT_EQ(::chown(ck.c_str(), nobody.uid, nobody.gid), 0);
  // A task points .ack at a root-only file: its first line must not be reported as a checkpoint path.
  const fs::path token = dir_ / "token";
  std::ofstream(token) << "the-agent-token\n";
  ASSERT_EQ(::chmod(token.c_str(), 0600), 0);
  fs::create_symlink(token, ck / ".ack");
  EXPECT_FALSE(read_checkpoint_ack(ck.string(), 0, nobody).has_value());
  EXPECT_EQ(read_checkpoint_ack(ck.string(), 0).value_or(""), "the-agent-token");  // what root alone would do
  // A planted FIFO does not stall the agent.
  fs::remove(ck / ".ack");
  ASSERT_EQ(::mkfifo((ck / ".ack").c_str(), 0644), 0);
  EXPECT_FALSE(read_checkpoint_ack(ck.string(), 0, nobody).has_value());
  // The request is written as the user (owned by it), and a planted tmp link is replaced, not followed.
  fs::create_symlink(token, ck / (".request.tmp." + std::to_string(::getpid())));
  ASSERT_TRUE(write_checkpoint_request(ck.string(), 5, "test", "stop", nobody).ok());
  struct stat st{};
  ASSERT_EQ(::stat((ck / ".request").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, nobody.uid);
  EXPECT_EQ(slurp(token), "the-agent-token\n");
  // A directory the user cannot write is refused, not written as root.
  fs::create_directories(dir_ / "rootonly");
  EXPECT_FALSE(write_checkpoint_request((dir_ / "rootonly").string(), 5, "test", "stop", nobody).ok());
  EXPECT_FALSE(fs::exists(dir_ / "rootonly" / ".request"));
}

TEST(SignalNumber, NamesAnyCaseWithOrWithoutSig) {
  EXPECT_EQ(signal_number("SIGUSR1").value(), SIGUSR1);
  EXPECT_EQ(signal_number("usr1").value(), SIGUSR1);
  EXPECT_EQ(signal_number("SigUsr2").value(), SIGUSR2);
  EXPECT_EQ(signal_number("TERM").value(), SIGTERM);
  EXPECT_EQ(signal_number("sigint").value(), SIGINT);
  EXPECT_EQ(signal_number("HUP").value(), SIGHUP);
  EXPECT_EQ(signal_number("SIGQUIT").value(), SIGQUIT);
  EXPECT_EQ(signal_number("kill").value(), SIGKILL);
  EXPECT_EQ(signal_number("SIGCONT").value(), SIGCONT);
  EXPECT_EQ(signal_number("STOP").value(), SIGSTOP);
  EXPECT_EQ(signal_number("SIGWINCH").value(), SIGWINCH);
  auto bad = signal_number("SIGFOO");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("SIGFOO"), std::string::npos);
  EXPECT_NE(bad.error().message.find("SIGUSR1"), std::string::npos);
  EXPECT_FALSE(signal_number("").ok());
}

TEST_F(TaskProcessTest, CheckpointRequestAndAckRoundTrip) {
  fs::path ck = dir_ / "ckpt" / "sub";
  const int64_t now = ::time(nullptr);
  ASSERT_TRUE(write_checkpoint_request(ck.string(), now, "preempted by job 7").ok());
  EXPECT_EQ(slurp(ck / ".request"), std::to_string(now) + "\npreempted by job 7\nstop\n");
  for (const auto& e : fs::directory_iterator(ck))  // no temporary file left behind
    EXPECT_EQ(e.path().filename(), ".request");

  EXPECT_FALSE(read_checkpoint_ack(ck.string(), now).has_value());  // no ack yet
  std::ofstream(ck / ".ack") << "  /ckpt/step-100  \nsecond line\n";
  EXPECT_EQ(read_checkpoint_ack(ck.string(), now - 5).value_or(""), "/ckpt/step-100");

  // An ack older than the request does not count.
  struct timeval old[2] = {{now - 100, 0}, {now - 100, 0}};
  ASSERT_EQ(::utimes((ck / ".ack").c_str(), old), 0);
  EXPECT_FALSE(read_checkpoint_ack(ck.string(), now).has_value());
  EXPECT_EQ(read_checkpoint_ack(ck.string(), now - 100).value_or(""), "/ckpt/step-100");

  // An empty first line does not count.
  std::ofstream(ck / ".ack", std::ios::trunc) << "   \n";
  EXPECT_FALSE(read_checkpoint_ack(ck.string(), now - 5).has_value());

  clear_checkpoint_request(ck.string());
  EXPECT_FALSE(fs::exists(ck / ".request"));
  EXPECT_TRUE(fs::exists(ck / ".ack"));
  clear_checkpoint_request(ck.string());  // idempotent
}

TEST_F(TaskProcessTest, SaveRequestAndAnAckWrittenWithinTheSameSecond) {
  fs::path ck = dir_ / "ckpt-save";
  const int64_t now = ::time(nullptr);
  ASSERT_TRUE(write_checkpoint_request(ck.string(), now, "periodic save on spot", "save").ok());
  EXPECT_EQ(slurp(ck / ".request"), std::to_string(now) + "\nperiodic save on spot\nsave\n");
  std::ofstream(ck / ".ack") << "/ckpt/a\n";
  const AckStamp before = checkpoint_ack_stamp(ck.string());
  EXPECT_NE(before, AckStamp{});
  EXPECT_FALSE(read_checkpoint_ack_since(ck.string(), before).has_value());  // the old one
  // A new .ack (the protocol's write-and-rename) counts even within the same second.
  std::ofstream(ck / ".ack.tmp") << "/ckpt/b\n";
  fs::rename(ck / ".ack.tmp", ck / ".ack");
  EXPECT_EQ(read_checkpoint_ack_since(ck.string(), before).value_or(""), "/ckpt/b");
  EXPECT_EQ(read_checkpoint_ack_since(ck.string(), AckStamp{}).value_or(""), "/ckpt/b");
  fs::remove(ck / ".ack");
  EXPECT_FALSE(read_checkpoint_ack_since(ck.string(), before).has_value());
}

TEST_F(TaskProcessTest, CgroupSupportOrAReason) {
  CgroupSupport cg = cgroup_support();
  auto l = launch({"/bin/sleep", "10"});
  l.memory_limit_mib = 100;
  l.cpu_limit_milli = 1500;
  l.pids_limit = 50;
  l.cgroup_name = "tessera-test-" + std::to_string(::getpid());
  auto p = TaskProcess::start(l);
  ASSERT_TRUE(p.ok()) << p.error().message;  // never fails for lack of cgroups
  std::vector<std::string> groups;
  if (!cg.available) {
    EXPECT_FALSE(cg.reason.empty());
    EXPECT_EQ(cg.version, 0);
    EXPECT_FALSE(p->limits_enforced());
    EXPECT_FALSE(p->grouped());
  } else if (cg.version == 2) {
    EXPECT_FALSE(cg.root.empty());
    ASSERT_TRUE(p->limits_enforced());
    fs::path group = fs::path(cg.root) / l.cgroup_name;
    groups.push_back(group.string());
    EXPECT_EQ(slurp(group / "memory.max"), "104857600\n");
    EXPECT_EQ(slurp(group / "cpu.max"), "150000 100000\n");
    if (cg.pids) {
      EXPECT_EQ(slurp(group / "pids.max"), "50\n");
    }
    EXPECT_NE(slurp(group / "cgroup.procs").find(std::to_string(p->pid())), std::string::npos);
  } else {
    EXPECT_EQ(cg.version, 1);
    EXPECT_TRUE(cg.pids && cg.freezer);
    ASSERT_TRUE(p->grouped());
    EXPECT_EQ(p->limits_enforced(), cg.memory);
    ASSERT_EQ(p->cgroup_dirs().size(), cg.v1_dirs.size());
    for (const auto& [controller, own] : cg.v1_dirs) {
      fs::path group = fs::path(own) / l.cgroup_name;
      groups.push_back(group.string());
      EXPECT_EQ(slurp(group / "cgroup.procs"), std::to_string(p->pid()) + "\n") << group;
    }
    EXPECT_EQ(slurp(fs::path(cg.v1_dirs.at("pids")) / l.cgroup_name / "pids.max"), "50\n");
    if (cg.memory) {
      EXPECT_EQ(slurp(fs::path(cg.v1_dirs.at("memory")) / l.cgroup_name / "memory.limit_in_bytes"), "104857600\n");
    }
    if (cg.cpu) {
      fs::path cpu = fs::path(cg.v1_dirs.at("cpu")) / l.cgroup_name;
      EXPECT_EQ(slurp(cpu / "cpu.cfs_period_us"), "100000\n");
      EXPECT_EQ(slurp(cpu / "cpu.cfs_quota_us"), "150000\n");
    }
  }
  p->kill_now();
  EXPECT_EQ(wait_exit(*p), 137);
  EXPECT_FALSE(p->oom_killed());
  for (const auto& g : groups) EXPECT_FALSE(fs::exists(g)) << g;  // removed once the process exited
}

// Whole-tree kill through the task's cgroup (as root, with cgroup v2 delegated or the v1 pids and
// freezer hierarchies). Processes are found by a marker argument unique to the test process.
class TaskProcessCgroupTest : public TaskProcessTest {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root: task cgroups are made under the agent's own cgroup";
    cg_ = cgroup_support();
    if (!cg_.available) GTEST_SKIP() << "no usable cgroup here: " << cg_.reason;
    TaskProcessTest::SetUp();
    prefix_ = "tessera-test-" + std::to_string(::getpid());
  }
  void TearDown() override {
    kill_cgroup_leftovers(prefix_);
    for (const auto& base : bases()) ::rmdir((base + "/" + prefix_).c_str());  // the parent left for reuse
    TaskProcessTest::TearDown();
  }
  // Own group directory of each hierarchy task groups go under.
  std::vector<std::string> bases() const {
    std::vector<std::string> out;
    if (cg_.version == 2) out.push_back(cg_.root);
    for (const auto& [c, d] : cg_.v1_dirs) out.push_back(d);
    return out;
  }
  // A sleep argument no other test process uses ("300.<pid><n>").
  std::string marker() { return "300." + std::to_string(::getpid()) + std::to_string(++markers_); }
  TaskLaunch grouped(std::string script, const std::string& name) {
    auto l = launch({"/bin/sh", "-c", std::move(script)});
    l.cgroup_name = prefix_ + "/" + name;
    return l;
  }
  CgroupSupport cg_;
  std::string prefix_;
  int markers_ = 0;
};

// Live processes (not zombies: their cmdline is empty) running exactly `sleep <marker>` (not, say,
// `setsid sleep <marker>` before its exec).
std::vector<pid_t> sleeping(const std::string& marker) {
  std::vector<pid_t> out;
  const std::string want = std::string("sleep") + '\0' + marker + '\0';
  for (const auto& e : fs::directory_iterator("/proc")) {
    const std::string name = e.path().filename();
    if (name.empty() || !std::all_of(name.begin(), name.end(), ::isdigit)) continue;
    if (slurp(e.path() / "cmdline") == want) out.push_back(std::stoi(name));
  }
  return out;
}

TEST_F(TaskProcessCgroupTest, KillNowKillsASetsidDaemon) {
  const std::string m = marker();
  auto p = TaskProcess::start(grouped("setsid sleep " + m + " & sleep " + m, "setsid"));
  ASSERT_TRUE(p.ok()) << p.error().message;
  ASSERT_TRUE(p->grouped());
  ASSERT_TRUE(eventually([&] { return sleeping(m).size() == 2; }));
  bool outside = false;  // the daemon really left the task's process group
  for (pid_t pid : sleeping(m)) outside |= ::getpgid(pid) != p->pid();
  ASSERT_TRUE(outside);
  p->kill_now();
  EXPECT_TRUE(sleeping(m).empty());  // gone when kill_now returns
  EXPECT_EQ(wait_exit(*p), 137);
  EXPECT_TRUE(p->cgroup_dirs().empty());
  for (const auto& base : bases()) EXPECT_FALSE(fs::exists(base + "/" + prefix_ + "/setsid"));
  for (const auto& base : bases()) EXPECT_TRUE(fs::exists(base + "/" + prefix_));  // the parent stays
}

TEST_F(TaskProcessCgroupTest, KillNowKillsADoubleForkedDaemon) {
  const std::string m = marker();
  // The middle process exits at once: the daemon is reparented away from the task, in a new session.
  auto p = TaskProcess::start(grouped("( setsid sh -c 'sleep " + m + " & sleep " + m + "' & ); sleep " + m, "double"));
  ASSERT_TRUE(p.ok()) << p.error().message;
  ASSERT_TRUE(eventually([&] { return sleeping(m).size() == 3; }));
  p->kill_now();
  EXPECT_TRUE(sleeping(m).empty());
  EXPECT_EQ(wait_exit(*p), 137);
}

TEST_F(TaskProcessCgroupTest, TerminateTermsDaemonsOutsideTheProcessGroupAndKillsTheRestAfterGrace) {
  const std::string m = marker();
  const std::string ignoring = marker();
  // One daemon takes TERM; one ignores it (and so does the main process), so only KILL ends them.
  auto p = TaskProcess::start(grouped("setsid sleep " + m + " & setsid sh -c \"trap '' TERM; sleep " + ignoring +
                                          "\" & trap '' TERM; ( setsid sleep " + ignoring + " & ); sleep " + ignoring,
                                      "terminate"));
  ASSERT_TRUE(p.ok()) << p.error().message;
  ASSERT_TRUE(eventually([&] { return sleeping(m).size() == 1 && sleeping(ignoring).size() == 3; }));
  auto t0 = std::chrono::steady_clock::now();
  p->terminate(1);
  EXPECT_TRUE(eventually([&] { return sleeping(m).empty(); }));  // TERM reached the setsid daemon
  p->tick();
  EXPECT_FALSE(p->exited());
  EXPECT_EQ(sleeping(ignoring).size(), 3u);
  std::optional<int> code;
  EXPECT_TRUE(eventually([&] {
    p->tick();
    code = p->poll();
    return code.has_value();
  }, 3000ms));
  EXPECT_GE(std::chrono::steady_clock::now() - t0, 950ms);
  EXPECT_EQ(code, 137);
  EXPECT_TRUE(sleeping(ignoring).empty());
}

TEST_F(TaskProcessCgroupTest, ADaemonOfATaskThatExitedIsKilledAndTheGroupRemoved) {
  const std::string m = marker();
  const fs::path pidfile = dir_ / "daemon.pid";
  auto p = TaskProcess::start(grouped("setsid sh -c 'echo $$ > " + pidfile.string() + "; exec sleep " + m +
                                          "' & while [ ! -s " + pidfile.string() + " ]; do sleep 0.01; done; exit 0",
                                      "exits"));
  ASSERT_TRUE(p.ok()) << p.error().message;
  const auto dirs = p->cgroup_dirs();
  ASSERT_FALSE(dirs.empty());
  EXPECT_EQ(wait_exit(*p, 3000ms), 0);
  const pid_t daemon = read_pid(pidfile);
  ASSERT_GT(daemon, 0);
  EXPECT_TRUE(process_gone(daemon));
  EXPECT_TRUE(sleeping(m).empty());
  EXPECT_FALSE(p->oom_killed());
  for (const auto& d : dirs) EXPECT_FALSE(fs::exists(d.path)) << d.path;
}

TEST_F(TaskProcessCgroupTest, ForkingTaskIsKilledCompletely) {
  const std::string m = marker();
  auto l = grouped("while :; do setsid sleep " + m + " & done", "forks");
  l.pids_limit = 400;
  auto p = TaskProcess::start(l);
  ASSERT_TRUE(p.ok()) << p.error().message;
  ASSERT_TRUE(eventually([&] { return sleeping(m).size() >= 50; }));
  p->kill_now();
  EXPECT_TRUE(sleeping(m).empty());
  EXPECT_EQ(wait_exit(*p), 137);
}

TEST_F(TaskProcessCgroupTest, MemoryLimitKillsATaskThatAllocatesMore) {
  if (!cg_.memory) GTEST_SKIP() << "no memory controller: " << cg_.reason;
  // 200 MiB under a 32 MiB limit (python3 where there is one; else tail holding a line without end).
  auto l = fs::exists("/usr/bin/python3")
               ? launch({"/usr/bin/python3", "-c", "b = bytearray(200 * 1024 * 1024); print('allocated')"})
               : launch({"/bin/sh", "-c", "head -c 200000000 /dev/zero | tail"});
  l.cgroup_name = prefix_ + "/oom";
  l.memory_limit_mib = 32;
  auto p = TaskProcess::start(l);
  ASSERT_TRUE(p.ok()) << p.error().message;
  EXPECT_TRUE(p->limits_enforced());
  EXPECT_FALSE(p->oom_killed());  // not before it exits
  EXPECT_EQ(wait_exit(*p, 10000ms), 137) << log();
  EXPECT_TRUE(p->oom_killed());
  EXPECT_EQ(log().find("allocated"), std::string::npos);
  EXPECT_TRUE(p->cgroup_dirs().empty());

  // Within the limit: no OOM verdict.
  l.argv = {"/bin/sh", "-c", "head -c 1000000 /dev/zero | tail -c 1 > /dev/null"};
  auto q = TaskProcess::start(l);
  ASSERT_TRUE(q.ok()) << q.error().message;
  EXPECT_EQ(wait_exit(*q, 5000ms), 0);
  EXPECT_FALSE(q->oom_killed());
}

TEST_F(TaskProcessCgroupTest, LeftoversOfATaskNoLongerOwnedAreKilledAndRemoved) {
  const std::string m = marker();
  pid_t main_pid = -1;
  std::vector<std::string> dirs;
  {
    auto p = TaskProcess::start(grouped("setsid sleep " + m + " & sleep " + m, "job-1-a1-t0"));
    ASSERT_TRUE(p.ok()) << p.error().message;
    ASSERT_TRUE(eventually([&] { return sleeping(m).size() == 2; }));
    main_pid = p->pid();
    for (const auto& d : p->cgroup_dirs()) dirs.push_back(d.path);
    TaskProcess dropped = std::move(*p);  // as if the agent restarted: destroyed while running, never killed
  }
  EXPECT_EQ(sleeping(m).size(), 2u);
  EXPECT_FALSE(process_gone(main_pid));
  for (const auto& d : dirs) EXPECT_TRUE(fs::exists(d)) << d;
  EXPECT_EQ(kill_cgroup_leftovers("tessera-other-prefix-" + std::to_string(::getpid())), 0);
  EXPECT_EQ(kill_cgroup_leftovers(""), 0);
  EXPECT_EQ(sleeping(m).size(), 2u);

  EXPECT_EQ(kill_cgroup_leftovers(prefix_), 3);  // sh, its sleep and the setsid sleep
  EXPECT_TRUE(sleeping(m).empty());
  int st = 0;
  EXPECT_EQ(::waitpid(main_pid, &st, 0), main_pid);  // our child: reap it
  EXPECT_TRUE(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
  for (const auto& d : dirs) EXPECT_FALSE(fs::exists(d)) << d;
  for (const auto& base : bases()) EXPECT_TRUE(fs::exists(base + "/" + prefix_));
  EXPECT_EQ(kill_cgroup_leftovers(prefix_), 0);  // nothing left
}

TEST_F(TaskProcessCgroupTest, NoNameAndNoLimitMeansNoGroupOfItsOwn) {
  auto plain = TaskProcess::start(launch({"/bin/sleep", "10"}));  // e.g. a `podman run` client
  ASSERT_TRUE(plain.ok()) << plain.error().message;
  EXPECT_FALSE(plain->grouped());
  plain->kill_now();
  EXPECT_EQ(wait_exit(*plain), 137);
  auto l = launch({"/bin/sleep", "10"});
  l.pids_limit = 100;  // a limit alone: a group with a unique name
  auto limited = TaskProcess::start(l);
  ASSERT_TRUE(limited.ok()) << limited.error().message;
  ASSERT_TRUE(limited->grouped());
  const auto dirs = limited->cgroup_dirs();
  limited->kill_now();
  EXPECT_EQ(wait_exit(*limited), 137);
  for (const auto& d : dirs) EXPECT_FALSE(fs::exists(d.path)) << d.path;
}

TEST_F(TaskProcessCgroupTest, AGroupStillHoldingProcessesIsNotShared) {
  const std::string m = marker();
  auto a = TaskProcess::start(grouped("sleep " + m, "same"));
  ASSERT_TRUE(a.ok()) << a.error().message;
  auto b = TaskProcess::start(grouped("sleep " + m, "same"));
  ASSERT_TRUE(b.ok()) << b.error().message;
  ASSERT_FALSE(a->cgroup_dirs().empty());
  ASSERT_FALSE(b->cgroup_dirs().empty());
  EXPECT_NE(a->cgroup_dirs()[0].path, b->cgroup_dirs()[0].path);
  ASSERT_TRUE(eventually([&] { return sleeping(m).size() == 2; }));
  a->kill_now();
  EXPECT_EQ(wait_exit(*a), 137);
  EXPECT_FALSE(b->exited());  // not killed with a's group
  EXPECT_EQ(sleeping(m).size(), 1u);
  b->kill_now();
  EXPECT_EQ(wait_exit(*b), 137);
}

}  // namespace
}  // namespace tessera::agent
