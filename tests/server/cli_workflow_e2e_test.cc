// End to end: the Slurm habits through the real `tessera` CLI, against a real `tessera server` and
// two real agents with fake GPUs running real task processes. Arrays with a running limit (%N), each
// dependency type (a never-satisfied one with and without --kill-on-invalid-dep), hold / release /
// requeue, `tessera run` exiting with the job's exit code and cancelling on SIGINT, `history`
// windows and formats, a batch script's #SBATCH lines, the CLI config file, and cancel by filters.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <ctime>
#include <map>
#include <sstream>

#include "../agent/agent_process.h"
#include "cli/format.h"

namespace tessera::testing {
namespace {

const std::string kCluster = TESSERA_SOURCE_DIR "/tests/agent/data/agents_cluster.yaml";  // queue "default"

std::string show(const CliResult& r) {
  return "exit " + std::to_string(r.status) + "\n--- stdout\n" + r.out + "--- stderr\n" + r.err;
}
bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

void write_file(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::trunc);
  f << text;
}

// The number after `prefix` in `text` (-1 if absent).
int64_t number_after(const std::string& text, const std::string& prefix) {
  const auto at = text.find(prefix);
  if (at == std::string::npos) return -1;
  return std::stoll(text.substr(at + prefix.size()));
}


class CliWorkflow : public ::testing::Test {
 protected:
  void SetUp() override {
    server.with_agents({"--heartbeat-interval-ms", "200", "--missed-heartbeats", "8"});
    std::string out;
    ASSERT_TRUE(server.start(&out)) << out;
    url = "http://127.0.0.1:" + std::to_string(server.port());
    for (int i = 0; i < 2; ++i) {
      agents.push_back(std::make_unique<AgentProcess>("gpu-" + std::to_string(i), "fake:4xH100-80GB-SXM,nvswitch"));
      agents.back()->start(server.port(), server.admin_token());
    }
    ASSERT_TRUE(eventually(
        [&] {
          size_t ready = 0;
          for (const Json& n : server.get("/api/v1/nodes", server.admin_token()).body.value("nodes", Json::array()))
            ready += n.value("agent", "") == "ready";
          return ready >= 2;
        },
        20));
    work = task_writable_dir("tessera-cli-wf");
    env = {{"TESSERA_SERVER", url}, {"TESSERA_TOKEN", server.admin_token()}, {"TESSERA_CONFIG", "/dev/null"}};
  }
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(work, ec);
  }
  CliResult cli(std::vector<std::string> args, int timeout_s = 60) { return run_cli(args, env, timeout_s); }
  Json job(const std::string& ref) { return server.get("/api/v1/jobs/" + ref, server.admin_token()).body; }
  Json job(int64_t id) { return job(std::to_string(id)); }
  std::string state(int64_t id) { return job(id).value("state", ""); }
  bool settles(int64_t id, const std::string& st, double seconds = 20, const std::string& wait = "") {
    return eventually(
        [&] {
          const Json j = job(id);
          return j.value("state", "") == st && (wait.empty() || (j["wait"].is_string() && j["wait"] == wait));
        },
        seconds);
  }
  // `tessera submit ARGS` that must succeed; the job id.
  int64_t submit(std::vector<std::string> args) {
    args.insert(args.begin(), "submit");
    const CliResult r = cli(args);
    EXPECT_EQ(r.status, 0) << show(r);
    return number_after(r.out, "Submitted job ");
  }

  ServerProcess server{kCluster};
  std::vector<std::unique_ptr<AgentProcess>> agents;
  std::string url, work;
  std::map<std::string, std::string> env;
};

TEST_F(CliWorkflow, ArrayRunsAtMostItsLimitAndEachElementHasItsIndex) {
  const CliResult r = cli({"submit", "--queue", "default", "--gpus", "1", "--array", "0-5%2", "--name", "sweep", "--",
                           "/bin/sh", "-c", "echo index=$TESSERA_ARRAY_TASK_ID slurm=$SLURM_ARRAY_TASK_ID; sleep 1.5"});
  ASSERT_EQ(r.status, 0) << show(r);
  const int64_t parent = number_after(r.out, "Submitted array job ");
  ASSERT_GT(parent, 0) << show(r);
  const std::string p = std::to_string(parent);
  EXPECT_TRUE(contains(r.out, "(6 tasks: " + p + "_0.." + p + "_5)")) << show(r);
  // Never more than two running; all six end; each saw its own index.
  int most = 0;
  ASSERT_TRUE(eventually(
      [&] {
        const Json list = server.get("/api/v1/jobs?array=" + p + "&limit=100", server.admin_token()).body;
        int running = 0, done = 0;
        for (const Json& j : list.value("jobs", Json::array())) {
          running += j.value("state", "") == "running";
          done += j.value("state", "") == "succeeded";
        }
        most = std::max(most, running);
        return done == 6;
      },
      60));
  EXPECT_EQ(most, 2);
  const CliResult logs = cli({"logs", p + "_3"});
  ASSERT_EQ(logs.status, 0) << show(logs);
  EXPECT_TRUE(contains(logs.out, "index=3 slurm=3")) << show(logs);
  // The list shows elements by reference; --array selects one array.
  const CliResult list = cli({"jobs", "--all", "--array", p});
  ASSERT_EQ(list.status, 0) << show(list);
  for (int i = 0; i < 6; ++i) EXPECT_TRUE(contains(list.out, p + "_" + std::to_string(i) + " ")) << show(list);
}

TEST_F(CliWorkflow, DependenciesOfEveryType) {
  const int64_t ok = submit({"--queue", "default", "--gpus", "1", "--name", "ok", "--", "/bin/sh", "-c", "sleep 2"});
  const int64_t bad = submit({"--queue", "default", "--gpus", "1", "--name", "bad", "--", "/bin/sh", "-c", "sleep 1; exit 3"});
  const int64_t long_run = submit({"--queue", "default", "--gpus", "1", "--name", "long", "--", "sleep", "30"});
  const std::string o = std::to_string(ok), b = std::to_string(bad), l = std::to_string(long_run);
  const int64_t after_ok = submit({"--queue", "default", "--gpus", "1", "-d", "afterok:" + o, "--", "true"});
  const int64_t after_not_ok = submit({"--queue", "default", "--gpus", "1", "--dependency", "afternotok:" + b, "--", "true"});
  const int64_t after_any = submit({"--queue", "default", "--gpus", "1", "--dependency", "afterany:" + b + ":" + o, "--", "true"});
  const int64_t after = submit({"--queue", "default", "--gpus", "1", "--dependency", "after:" + l, "--", "true"});
  // afternotok on a job that succeeds: never satisfied; shown as such, and cancelled if asked.
  const int64_t never = submit({"--queue", "default", "--gpus", "1", "--dependency", "afternotok:" + o, "--", "true"});
  const int64_t killed =
      submit({"--queue", "default", "--gpus", "1", "--dependency", "afternotok:" + o, "--kill-on-invalid-dep", "--", "true"});
  EXPECT_EQ(job(after_ok)["wait"], "dependency");
  EXPECT_EQ(job(after_ok)["dependency"], "afterok:" + o);

  EXPECT_TRUE(settles(after, "succeeded", 20)) << job(after).dump();  // `after` needs only the start
  EXPECT_EQ(state(long_run), "running");
  EXPECT_TRUE(settles(after_ok, "succeeded", 30)) << job(after_ok).dump();
  EXPECT_TRUE(settles(after_not_ok, "succeeded", 30)) << job(after_not_ok).dump();
  EXPECT_TRUE(settles(after_any, "succeeded", 30)) << job(after_any).dump();
  EXPECT_TRUE(settles(never, "pending", 20, "dependency_never_satisfied")) << job(never).dump();
  EXPECT_TRUE(settles(killed, "cancelled", 20)) << job(killed).dump();
  const CliResult list = cli({"jobs"});
  EXPECT_TRUE(contains(list.out, "DependencyNeverSatisfied")) << show(list);

  // singleton: one running per name and user.
  const int64_t s1 = submit({"--queue", "default", "--gpus", "1", "--name", "solo", "-d", "singleton", "--", "sleep", "2"});
  ASSERT_TRUE(settles(s1, "running", 20));
  const int64_t s2 = submit({"--queue", "default", "--gpus", "1", "--name", "solo", "-d", "singleton", "--", "true"});
  EXPECT_TRUE(settles(s2, "pending", 5, "dependency")) << job(s2).dump();
  EXPECT_TRUE(settles(s2, "succeeded", 30)) << job(s2).dump();
  EXPECT_GE(job(s2)["started"].get<int64_t>(), job(s1)["finished"].get<int64_t>());
  cli({"cancel", l});
}

TEST_F(CliWorkflow, HoldReleaseRequeueAndAttempts) {
  // Submitted held: pending until released.
  const int64_t held = submit({"--queue", "default", "--gpus", "1", "--hold", "--", "sleep", "30"});
  const std::string h = std::to_string(held);
  ASSERT_TRUE(settles(held, "pending", 5, "held"));
  CliResult list = cli({"jobs"});
  EXPECT_TRUE(contains(list.out, "pending (held)")) << show(list);
  CliResult r = cli({"release", h});
  ASSERT_EQ(r.status, 0) << show(r);
  EXPECT_TRUE(contains(r.out, "Released job " + h)) << show(r);
  ASSERT_TRUE(settles(held, "running", 20)) << job(held).dump();

  // Requeue a running job: back to pending, then a second attempt.
  r = cli({"requeue", h});
  ASSERT_EQ(r.status, 0) << show(r);
  EXPECT_TRUE(contains(r.out, "job " + h)) << show(r);
  ASSERT_TRUE(eventually([&] { return job(held).value("attempt", 0) == 2 && state(held) == "running"; }, 30)) << job(held).dump();
  const CliResult a1 = cli({"show", h, "--attempt", "1"});
  ASSERT_EQ(a1.status, 0) << show(a1);
  EXPECT_TRUE(contains(a1.out, "attempt 1 of 2")) << show(a1);
  EXPECT_TRUE(contains(a1.out, "gpu-")) << show(a1);  // where it ran
  EXPECT_TRUE(contains(a1.out, "How:")) << show(a1);
  const CliResult a3 = cli({"jobs", "show", h, "--attempt", "3"});
  EXPECT_EQ(a3.status, 2) << show(a3);
  EXPECT_TRUE(contains(a3.err, "has attempts 1..2")) << show(a3);

  // requeue --hold: back to pending and held; hold/release of a pending job.
  r = cli({"requeue", "--hold", h});
  ASSERT_EQ(r.status, 0) << show(r);
  ASSERT_TRUE(settles(held, "pending", 20, "held")) << job(held).dump();
  r = cli({"release", h});
  ASSERT_EQ(r.status, 0) << show(r);
  ASSERT_TRUE(settles(held, "running", 20));
  const int64_t p = submit({"--queue", "default", "--gpus", "4", "--tasks", "2", "--begin", "now+1h", "--", "true"});
  EXPECT_TRUE(settles(p, "pending", 5, "begin_time")) << job(p).dump();
  r = cli({"hold", std::to_string(p)});
  ASSERT_EQ(r.status, 0) << show(r);
  EXPECT_TRUE(contains(r.out, "Held job " + std::to_string(p))) << show(r);
  EXPECT_TRUE(job(p).value("held", false));
  // Bad references are usage errors.
  r = cli({"hold", "12_x"});
  EXPECT_EQ(r.status, 2) << show(r);
  EXPECT_TRUE(contains(r.err, "tessera hold: JOB: '12_x'")) << show(r);
  cli({"cancel", h, std::to_string(p)});
}

TEST_F(CliWorkflow, RequeueCheckpointsAJobThatSupportsItAndResumesIt) {
  // A job that checkpoints on SIGUSR1 (docs/checkpointing.md): it saves, acknowledges and exits.
  const std::string spec = work + "/ckpt.yaml";
  write_file(spec,
             "name: ckpt\nqueue: default\nresources: {gpus: 1}\n"
             "checkpoint: {interval: 600, signal: SIGUSR1, grace: 20}\n"
             "command: [/bin/sh, -c, 'echo \"attempt $TESSERA_ATTEMPT resume=${TESSERA_RESUME_FROM:-none}\"; "
             "trap \"echo saved > $TESSERA_CHECKPOINT_DIR/c1; echo $TESSERA_CHECKPOINT_DIR/c1 > $TESSERA_CHECKPOINT_DIR/.ack.tmp; "
             "mv $TESSERA_CHECKPOINT_DIR/.ack.tmp $TESSERA_CHECKPOINT_DIR/.ack; exit 0\" USR1; "
             "while true; do sleep 0.2; done']\n");
  const int64_t id = submit({spec});
  const std::string ref = std::to_string(id);
  ASSERT_TRUE(settles(id, "running", 20)) << job(id).dump();
  ASSERT_TRUE(eventually([&] { return contains(cli({"logs", ref}).out, "attempt 1 resume=none"); }, 20));
  // requeue --hold: checkpointed first, then pending and held; no restart or preemption counted.
  CliResult r = cli({"requeue", "--hold", ref});
  ASSERT_EQ(r.status, 0) << show(r);
  ASSERT_TRUE(settles(id, "pending", 30, "held")) << job(id).dump();
  Json j = job(id);
  EXPECT_EQ(j.value("restarts", -1), 0) << j.dump();
  EXPECT_EQ(j.value("preemptions", -1), 0) << j.dump();
  ASSERT_TRUE(j["resume_from"].is_string()) << j.dump();
  const CliResult a1 = cli({"show", ref, "--attempt", "1"});
  EXPECT_TRUE(contains(a1.out, "checkpointed=true")) << show(a1);
  // Released, it resumes from the checkpoint it saved.
  r = cli({"release", ref});
  ASSERT_EQ(r.status, 0) << show(r);
  ASSERT_TRUE(settles(id, "running", 20)) << job(id).dump();
  EXPECT_TRUE(eventually([&] { return contains(cli({"logs", ref}).out, "attempt 2 resume=/"); }, 20)) << cli({"logs", ref}).out;
  cli({"cancel", ref});
}

TEST_F(CliWorkflow, RunExitsWithTheJobsCodeAndStreamsItsOutput) {
  CliResult r = cli({"run", "--queue", "default", "--gpus", "1", "--", "/bin/sh", "-c", "echo hello from the job; exit 3"});
  EXPECT_EQ(r.status, 3) << show(r);
  EXPECT_TRUE(contains(r.out, "hello from the job")) << show(r);
  EXPECT_TRUE(contains(r.err, "failed")) << show(r);
  r = cli({"run", "--queue", "default", "--gpus", "1", "--tasks", "2", "--all-tasks", "--", "/bin/sh", "-c", "echo rank $RANK"});
  EXPECT_EQ(r.status, 0) << show(r);
  EXPECT_TRUE(contains(r.out, "[0] rank 0")) << show(r);
  EXPECT_TRUE(contains(r.out, "[1] rank 1")) << show(r);
  r = cli({"run", "--queue", "default", "--gpus", "1", "--time", "0:02", "--", "sleep", "30"});
  EXPECT_EQ(r.status, 124) << show(r);  // stopped at its time limit
  r = cli({"run", "--pty", "--queue", "default", "--", "bash"});
  EXPECT_EQ(r.status, 2) << show(r);
  EXPECT_TRUE(contains(r.err, "--pty")) << show(r);
}

TEST_F(CliWorkflow, RunCancelsTheJobOnSigint) {
  const std::string out = work + "/run.out", err = work + "/run.err";
  const pid_t pid = fork();
  if (pid == 0) {
    const int o = open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600), e = open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    dup2(o, 1);
    dup2(e, 2);
    for (const auto& [k, v] : env) setenv(k.c_str(), v.c_str(), 1);
    execl(TESSERA_BINARY, TESSERA_BINARY, "run", "--queue", "default", "--gpus", "1", "--", "/bin/sh", "-c",
          "echo started; sleep 60", static_cast<char*>(nullptr));
    _exit(127);
  }
  int64_t id = -1;
  ASSERT_TRUE(eventually(
      [&] {
        id = number_after(read_file(err), "tessera run: job ");
        return id > 0 && state(id) == "running" && contains(read_file(out), "started");
      },
      30))
      << read_file(err);
  ::kill(pid, SIGINT);
  int status = 0;
  ASSERT_TRUE(eventually([&] { return waitpid(pid, &status, WNOHANG) == pid; }, 30));
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 130) << read_file(err);
  EXPECT_EQ(state(id), "cancelled");
  EXPECT_TRUE(contains(read_file(err), "cancelling job " + std::to_string(id))) << read_file(err);
}

TEST_F(CliWorkflow, HistoryWindowsFormatsAndFilters) {
  const int64_t good = submit({"--queue", "default", "--gpus", "2", "--name", "h-good", "--", "/bin/sh", "-c", "sleep 1"});
  const int64_t bad = submit({"--queue", "default", "--gpus", "1", "--name", "h-bad", "--", "/bin/sh", "-c", "exit 7"});
  ASSERT_TRUE(settles(good, "succeeded", 30));
  ASSERT_TRUE(settles(bad, "failed", 30));
  const std::string g = std::to_string(good), b = std::to_string(bad);
  CliResult r = cli({"history"});
  ASSERT_EQ(r.status, 0) << show(r);
  for (const char* col : {"JOBID", "NAME", "USER", "QUEUE", "STATE", "EXIT", "ELAPSED", "GPU_HOURS", "NODES", "ATTEMPTS"})
    EXPECT_TRUE(contains(r.out, col)) << col << "\n" << show(r);
  EXPECT_TRUE(contains(r.out, "h-good")) << show(r);
  EXPECT_TRUE(contains(r.out, "7:0")) << show(r);  // the failed job's ExitCode
  // CSV of chosen columns (sacct names work too), filtered by state.
  r = cli({"history", "--since", "1h", "--format", "jobid,jobname,state,exitcode,nodelist,attempts", "--csv", "--state", "failed"});
  ASSERT_EQ(r.status, 0) << show(r);
  EXPECT_TRUE(contains(r.out, "jobid,name,state,exit,nodes,attempts\n")) << show(r);
  EXPECT_TRUE(contains(r.out, b + ",h-bad,failed,7:0,gpu-")) << show(r);
  EXPECT_FALSE(contains(r.out, "h-good")) << show(r);
  // JSON: the records of the window.
  r = cli({"history", "--json", "--name", "h-good"});
  ASSERT_EQ(r.status, 0) << show(r);
  const Json j = Json::parse(r.out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << show(r);
  ASSERT_EQ(j["jobs"].size(), 1u) << show(r);
  EXPECT_EQ(j["jobs"][0]["id"], good);
  EXPECT_GT(j["jobs"][0]["gpu_seconds"].get<int64_t>(), 0);
  // A window before they ran holds none of them.
  r = cli({"history", "--since", "2020-01-01T00:00", "--until", "2020-01-02"});
  ASSERT_EQ(r.status, 0) << show(r);
  EXPECT_FALSE(contains(r.out, "h-good")) << show(r);
  r = cli({"history", "--until", "now-1h"});
  EXPECT_FALSE(contains(r.out, "h-bad")) << show(r);
  // Usage errors name the flag.
  r = cli({"history", "--since", "last tuesday"});
  EXPECT_EQ(r.status, 2);
  EXPECT_TRUE(contains(r.err, "tessera history: --since: 'last tuesday'")) << show(r);
  r = cli({"history", "--format", "jobid,colour"});
  EXPECT_EQ(r.status, 2);
  EXPECT_TRUE(contains(r.err, "unknown column 'colour'")) << show(r);
  r = cli({"history", "--state", "running"});
  EXPECT_EQ(r.status, 2);
}

TEST_F(CliWorkflow, BatchScriptWithSbatchLines) {
  const std::string script = work + "/train.sh";
  write_file(script,
             "#!/bin/bash\n"
             "#SBATCH --job-name=sb-train\n"
             "#SBATCH --partition=default\n"
             "#SBATCH --ntasks=2\n"
             "#SBATCH --gres=gpu:2\n"
             "#SBATCH --time=00:05:00\n"
             "#SBATCH --mail-type=END\n"
             "echo \"rank=$RANK args=$1 name=$0\"\n");
  CliResult r = cli({"submit", script, "first-arg"});
  ASSERT_EQ(r.status, 0) << show(r);
  const int64_t id = number_after(r.out, "Submitted job ");
  ASSERT_GT(id, 0) << show(r);
  EXPECT_TRUE(contains(r.err, "line 7: ignored --mail-type=END")) << show(r);
  Json j = job(id);
  EXPECT_EQ(j["name"], "sb-train");
  EXPECT_EQ(j["tasks"], 2);
  EXPECT_EQ(j["spec"]["resources"]["gpus"], 1);  // gpu:2 on the node, over 2 tasks
  EXPECT_EQ(j["spec"]["max_runtime"], 300);
  EXPECT_EQ(j["spec"]["command"][0], "/bin/bash");
  ASSERT_TRUE(settles(id, "succeeded", 30)) << job(id).dump();
  r = cli({"logs", std::to_string(id), "--task", "1"});
  EXPECT_TRUE(contains(r.out, "rank=1 args=first-arg name=" + script)) << show(r);
  // A shell script without #SBATCH lines and all options as flags (sbatch -n 1 --gres=gpu:1 job.sh):
  // its text is sent too, so the node needs no copy.
  const std::string plain = work + "/plain.sh";
  write_file(plain, "#!/bin/sh\necho \"plain $1\"\n");
  r = cli({"submit", "-p", "default", "--gpus", "1", plain, "x1"});
  ASSERT_EQ(r.status, 0) << show(r);
  const int64_t pid = number_after(r.out, "Submitted job ");
  EXPECT_EQ(job(pid)["spec"]["command"][0], "/bin/bash");
  EXPECT_EQ(job(pid)["name"], "plain.sh");
  std::filesystem::remove(plain);  // gone here: the job still has it
  ASSERT_TRUE(settles(pid, "succeeded", 30)) << job(pid).dump();
  EXPECT_TRUE(contains(cli({"logs", std::to_string(pid)}).out, "plain x1"));
  // Flags override the script's lines.
  r = cli({"submit", "--name", "override", "--time", "10", script});
  ASSERT_EQ(r.status, 0) << show(r);
  j = job(number_after(r.out, "Submitted job "));
  EXPECT_EQ(j["name"], "override");
  EXPECT_EQ(j["spec"]["max_runtime"], 600);
}

TEST_F(CliWorkflow, ConfigFileDefaultsAndPrecedence) {
  const std::string cfg = work + "/config.yaml", tok = work + "/token";
  write_file(tok, server.admin_token() + "\n");
  write_file(cfg, "server: " + url + "\ntoken_file: token\nqueue: default\n");
  // Everything from the file: no --queue, no env.
  CliResult r = run_cli({"submit", "--gpus", "1", "--", "true"}, {{"TESSERA_CONFIG", cfg}});
  ASSERT_EQ(r.status, 0) << show(r);
  EXPECT_EQ(job(number_after(r.out, "Submitted job ")).value("queue", ""), "default");
  // The environment beats the file, a flag beats both.
  write_file(cfg, "server: http://127.0.0.1:1\ntoken_file: token\n");
  r = run_cli({"jobs"}, {{"TESSERA_CONFIG", cfg}, {"TESSERA_SERVER", url}});
  EXPECT_EQ(r.status, 0) << show(r);
  r = run_cli({"jobs", "--server", url}, {{"TESSERA_CONFIG", cfg}, {"TESSERA_SERVER", "http://127.0.0.1:2"}});
  EXPECT_EQ(r.status, 0) << show(r);
  r = run_cli({"jobs"}, {{"TESSERA_CONFIG", cfg}});
  EXPECT_EQ(r.status, 1) << show(r);
  EXPECT_TRUE(contains(r.err, "127.0.0.1:1")) << show(r);
  // No queue anywhere: the error lists the user's queues.
  r = run_cli({"submit", "--gpus", "1", "--", "true"}, {{"TESSERA_CONFIG", cfg}, {"TESSERA_SERVER", url}});
  EXPECT_EQ(r.status, 2) << show(r);
  EXPECT_TRUE(contains(r.err, "no queue")) << show(r);
  EXPECT_TRUE(contains(r.err, "your queues: default")) << show(r);
  // A malformed file is named.
  write_file(cfg, "sever: x\n");
  r = run_cli({"jobs"}, {{"TESSERA_CONFIG", cfg}, {"TESSERA_SERVER", url}, {"TESSERA_TOKEN", server.admin_token()}});
  EXPECT_EQ(r.status, 2) << show(r);
  EXPECT_TRUE(contains(r.err, cfg)) << show(r);
}

TEST_F(CliWorkflow, ListingAndCancelByFilters) {
  std::vector<int64_t> ids;
  for (int i = 0; i < 3; ++i) ids.push_back(submit({"--queue", "default", "--gpus", "1", "--hold", "--name", "batch-x", "--", "true"}));
  const int64_t other = submit({"--queue", "default", "--gpus", "1", "--hold", "--name", "keep", "--", "true"});
  CliResult r = cli({"jobs", "--me", "--name", "batch-x", "--limit", "2"});
  ASSERT_EQ(r.status, 0) << show(r);
  EXPECT_TRUE(contains(r.err, "2 of 3 jobs shown; 1 more")) << show(r);
  EXPECT_FALSE(contains(r.out, "keep")) << show(r);
  // The API's "remaining" (jobs that match after the page) reaches --json too.
  r = cli({"jobs", "--me", "--name", "batch-x", "--limit", "2", "--json"});
  ASSERT_EQ(r.status, 0) << show(r);
  EXPECT_EQ(Json::parse(r.out).value("remaining", -1), 1) << show(r);
  r = cli({"jobs", "--start"});
  ASSERT_EQ(r.status, 0) << show(r);
  EXPECT_TRUE(contains(r.out, "START_TIME")) << show(r);
  EXPECT_TRUE(contains(r.out, "unknown")) << show(r);  // held: no expected start
  // --watch refreshes until stopped.
  r = run_cli({"jobs", "--watch", "1", "--name", "batch-x"}, env, 3);
  EXPECT_EQ(r.status, -1);  // still refreshing when the harness stopped it
  size_t refreshes = 0;
  for (size_t at = r.out.find("Every 1s: tessera jobs"); at != std::string::npos; at = r.out.find("Every 1s: tessera jobs", at + 1))
    ++refreshes;
  EXPECT_GE(refreshes, 2u) << show(r);
  r = cli({"jobs", "--sort", "size"});
  EXPECT_EQ(r.status, 2) << show(r);
  r = cli({"cancel", "--me", "--state", "pending", "--name", "batch-x"});
  ASSERT_EQ(r.status, 0) << show(r);
  for (int64_t id : ids) {
    EXPECT_TRUE(contains(r.out, "Cancelled job " + std::to_string(id))) << show(r);
    EXPECT_EQ(state(id), "cancelled");
  }
  EXPECT_EQ(state(other), "pending");
  r = cli({"cancel", "--state", "pending"});
  EXPECT_EQ(r.status, 2) << show(r);
  // --signal reaches a running job's tasks.
  const int64_t trap = submit({"--queue", "default", "--gpus", "1", "--", "/bin/sh", "-c",
                               "trap 'echo got USR1' USR1; echo ready; while true; do sleep 0.2; done"});
  ASSERT_TRUE(settles(trap, "running", 20));
  ASSERT_TRUE(eventually([&] { return contains(cli({"logs", std::to_string(trap)}).out, "ready"); }, 20));
  r = cli({"cancel", "--signal", "USR1", std::to_string(trap)});
  EXPECT_EQ(r.status, 0) << show(r);
  EXPECT_TRUE(eventually([&] { return contains(cli({"logs", std::to_string(trap)}).out, "got USR1"); }, 10));
  EXPECT_EQ(state(trap), "running");
  cli({"cancel", std::to_string(trap), std::to_string(other)});
  // --start: a job that waits for a running one with a time limit has an expected start.
  const int64_t big = submit({"--queue", "default", "--gpus", "4", "--tasks", "2", "-t", "10", "--", "sleep", "600"});
  ASSERT_TRUE(settles(big, "running", 20));
  const int64_t next = submit({"--queue", "default", "--gpus", "4", "-t", "5", "--name", "next", "--", "true"});
  ASSERT_TRUE(eventually([&] { return job(next)["estimated_start"].is_number(); }, 20)) << job(next).dump();
  r = cli({"jobs", "--start"});
  ASSERT_EQ(r.status, 0) << show(r);
  const std::string when = cli::format_local_time(job(next)["estimated_start"].get<int64_t>());
  EXPECT_TRUE(contains(r.out, when)) << when << "\n" << show(r);
  cli({"cancel", std::to_string(big), std::to_string(next)});
}


// docs/from-slurm.md names no flag the CLI lacks: each `tessera VERB ... --flag` it shows, and each
// flag of its sbatch options table (flags of `tessera submit`), is in that verb's --help.
TEST(FromSlurmDoc, EveryFlagItNamesExists) {
  const std::string doc = read_file(TESSERA_SOURCE_DIR "/docs/from-slurm.md");
  ASSERT_FALSE(doc.empty());
  std::map<std::string, std::string> helps;  // "jobs show" -> its --help
  auto help_of = [&](const std::string& w1, const std::string& w2) -> std::string {
    const std::string key = w2.empty() ? w1 : w1 + " " + w2;
    if (!helps.count(key)) {
      std::vector<std::string> args = {w1};
      if (!w2.empty()) args.push_back(w2);
      args.push_back("--help");
      const CliResult r = run_cli(args);
      helps[key] = r.status == 0 ? r.out : "";
    }
    return helps[key];
  };
  auto words_of = [](const std::string& text) {
    std::vector<std::string> w;
    std::istringstream in(text);
    for (std::string x; in >> x;) w.push_back(x);
    return w;
  };
  size_t checked = 0;
  // `tessera ...` snippets.
  for (size_t at = doc.find("`tessera "); at != std::string::npos; at = doc.find("`tessera ", at + 1)) {
    const size_t end = doc.find('`', at + 1);
    const std::vector<std::string> w = words_of(doc.substr(at + 1, end - at - 1));
    if (w.size() < 2) continue;
    std::string sub;
    if (w.size() > 2 && std::islower(static_cast<unsigned char>(w[2][0])) && !help_of(w[1], w[2]).empty()) sub = w[2];
    const std::string help = help_of(w[1], sub);
    ASSERT_FALSE(help.empty()) << "tessera " << w[1] << " " << sub << " --help failed";
    for (size_t i = 2; i < w.size(); ++i) {
      if (w[i] == "--") break;
      if (w[i].size() < 2 || w[i][0] != '-') continue;
      EXPECT_TRUE(contains(help, w[i] + ",") || contains(help, w[i] + " ")) << w[i] << " of tessera " << w[1] << " " << sub;
      ++checked;
    }
  }
  // The options table: its "Tessera flag" column holds flags of `tessera submit`.
  const std::string submit_help = help_of("submit", "");
  const size_t table = doc.find("| Slurm | Tessera flag |");
  ASSERT_NE(table, std::string::npos);
  for (size_t line = doc.find('\n', table); line != std::string::npos && line + 1 < doc.size() && doc[line + 1] == '|';
       line = doc.find('\n', line + 1)) {
    const std::string row = doc.substr(line + 1, doc.find('\n', line + 1) - line - 1);
    const size_t c1 = row.find('|', 1), c2 = row.find('|', c1 + 1);
    const std::string cell = row.substr(c1 + 1, c2 - c1 - 1);
    for (size_t b = cell.find('`'); b != std::string::npos; b = cell.find('`', cell.find('`', b + 1) + 1)) {
      const std::vector<std::string> w = words_of(cell.substr(b + 1, cell.find('`', b + 1) - b - 1));
      for (const std::string& f : w)
        if (f.size() >= 2 && f[0] == '-') {
          EXPECT_TRUE(contains(submit_help, f + ",") || contains(submit_help, f + " ")) << f << " of tessera submit";
          ++checked;
        }
    }
  }
  EXPECT_GT(checked, 50u);
}

}  // namespace
}  // namespace tessera::testing
