// `tessera run [--gpus N --tasks T ...] [--all-tasks] -- CMD ARGS...`: a foreground job, as srun is
// used in scripts and CI. It submits the job (the same resource flags as `tessera submit`), says on
// stderr why it waits while pending, streams task 0's output (or every task's, each line prefixed with
// "[K] ") to stdout once it runs, turns SIGINT/SIGTERM into a cancel of the job, and exits with the
// job's exit code: 0 succeeded, the task's code when it failed (128+N for a signal), 124 for a time
// limit, 130 when cancelled (143 after SIGTERM). Failures of the CLI itself exit 1, usage errors 2.
// --pty is refused (exit 2): agents run tasks without a terminal. Single-threaded (signal handlers
// only set a flag).
#include <signal.h>

#include <chrono>
#include <cstring>
#include <iostream>
#include <map>
#include <memory>
#include <thread>

#include "cli/client_util.h"
#include "cli/commands.h"
#include "cli/format.h"
#include "cli/submit_args.h"

namespace tessera::cli {
namespace {

using nlohmann::json;

volatile sig_atomic_t g_signal = 0;   // the first SIGINT/SIGTERM
volatile sig_atomic_t g_signals = 0;  // how many arrived

void on_signal(int sig) {
  if (g_signal == 0) g_signal = sig;
  g_signals = g_signals + 1;
}

struct RunArgs {
  SubmitArgs s;
  bool all_tasks = false, pty = false;
};

// One task's log as it arrives: a byte offset, and the incomplete last line when lines are prefixed.
struct TaskLog {
  int64_t offset = 0;
  std::string partial;
};

// Reads what is new in each followed task's log and prints it; returns the bytes read.
int64_t pump_logs(ApiClient& api, const std::string& ref, std::map<int, TaskLog>& logs, bool prefix, bool* all_ok) {
  int64_t total = 0;
  *all_ok = true;
  for (auto& [task, log] : logs) {
    int64_t got = 0;
    const Status st = api.download("/api/v1/jobs/" + ref + "/logs?task=" + std::to_string(task) + "&offset=" + std::to_string(log.offset),
                                   [&](const char* data, size_t n) {
                                     got += static_cast<int64_t>(n);
                                     if (!prefix) {
                                       std::cout.write(data, static_cast<std::streamsize>(n));
                                       return true;
                                     }
                                     log.partial.append(data, n);
                                     size_t nl;
                                     while ((nl = log.partial.find('\n')) != std::string::npos) {
                                       std::cout << "[" << task << "] " << log.partial.substr(0, nl + 1);
                                       log.partial.erase(0, nl + 1);
                                     }
                                     return true;
                                   });
    if (!st.ok()) *all_ok = false;
    log.offset += got;
    total += got;
  }
  std::cout.flush();
  return total;
}

void flush_partials(std::map<int, TaskLog>& logs) {
  for (auto& [task, log] : logs)
    if (!log.partial.empty()) {
      std::cout << "[" << task << "] " << log.partial << "\n";
      log.partial.clear();
    }
  std::cout.flush();
}

void run_run(RunArgs& a) {
  const std::string verb = "run";
  if (a.pty)
    fail(verb, "--pty: interactive shells are not supported yet (agents run tasks without a terminal); run a command, "
               "e.g. tessera run --gpus 1 -- nvidia-smi, or submit a job and follow it with `tessera logs ID -f`", 2);
  if (a.s.command.empty())
    fail(verb, "COMMAND: give the command to run after `--`, e.g. tessera run --gpus 1 --queue team-a -- python train.py", 2);
  auto api = connect(verb, a.s.conn);
  const json spec = build_submit_spec(verb, a.s, *api);
  if (spec.contains("array") && !spec["array"].is_null())
    fail(verb, "a job array runs many jobs; submit it with `tessera submit --array` and follow it with `tessera jobs`", 2);

  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;  // no SA_RESTART: a sleep or a read ends early
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);

  const ApiResponse created = call_post(verb, *api, "/api/v1/jobs", spec);
  const std::string ref = job_ref_of(created.body);
  if (ref == "-") fail(verb, "the server's answer has no job id");
  std::cerr << "tessera run: job " << ref << " submitted; Ctrl-C cancels it\n";

  std::map<int, TaskLog> logs;
  int64_t attempt = 0;
  std::string last_reason;
  int cancelled_by = 0;
  int failures = 0;
  json job;
  for (;;) {
    if (g_signals >= 2) {  // a second Ctrl-C: stop waiting (the cancel was sent)
      std::cerr << "tessera run: not waiting for job " << ref << " to stop; `tessera jobs` shows it\n";
      throw CLI::RuntimeError(cancelled_by == SIGTERM ? 143 : 130);
    }
    if (g_signal != 0 && cancelled_by == 0) {
      cancelled_by = g_signal;
      std::cerr << "tessera run: " << (cancelled_by == SIGINT ? "interrupted" : "terminated") << ": cancelling job " << ref << "\n";
      auto r = api->post("/api/v1/jobs/" + ref + "/cancel", json::object());
      if (!r.ok() && r.error().code != ErrorCode::kFailedPrecondition)
        std::cerr << "tessera run: job " << ref << ": cancel failed: " << r.error().message << "\n";
    }
    auto got = api->get("/api/v1/jobs/" + ref);
    if (!got.ok()) {
      if (got.error().code == ErrorCode::kNotFound || ++failures > 20) fail(verb, "job " + ref + ": " + got.error().message);
      std::this_thread::sleep_for(std::chrono::milliseconds(500));  // a signal cut the call short, or the server restarts
      continue;
    }
    failures = 0;
    job = got->body;
    const std::string state = json_text(job, "state", "");
    if (state == "pending") {
      std::string reason = json_text(job, "reason", "");
      if (const auto eta = json_int(job, "estimated_start"))
        reason += (reason.empty() ? "" : "; ") + std::string("expected start ") + format_local_time(*eta);
      if (reason != last_reason && !reason.empty()) std::cerr << "tessera run: job " << ref << " is pending: " << reason << "\n";
      last_reason = reason;
    } else {
      const int64_t now_attempt = json_int(job, "attempt").value_or(0);
      if (now_attempt != attempt) {
        if (attempt > 0) {
          flush_partials(logs);
          std::cerr << "tessera run: job " << ref << ": attempt " << now_attempt << " (the job was restarted)\n";
        } else if (state == "running" || state == "checkpointing") {
          std::cerr << "tessera run: job " << ref << " is running on " << join([&] {
            std::vector<std::string> n;
            for (const auto& x : job.value("nodes", json::array()))
              if (x.is_string()) n.push_back(x.get<std::string>());
            return n;
          }(), ",") << "\n";
        }
        attempt = now_attempt;
        logs.clear();
        const int64_t tasks = a.all_tasks ? std::max<int64_t>(1, json_int(job, "tasks").value_or(1)) : 1;
        for (int t = 0; t < tasks; ++t) logs[t] = TaskLog{};
      }
      bool ok = true;
      const int64_t n = attempt > 0 ? pump_logs(*api, ref, logs, a.all_tasks, &ok) : 0;
      if (is_final_state(state)) {
        // The rest of the output: read until a complete pass brings nothing new (a few seconds at most).
        for (int i = 0; i < 20 && attempt > 0; ++i) {
          if (pump_logs(*api, ref, logs, a.all_tasks, &ok) == 0 && ok) break;
          std::this_thread::sleep_for(std::chrono::milliseconds(100));
        }
        flush_partials(logs);
        break;
      }
      if (n > 0) continue;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
  }

  const std::string state = json_text(job, "state", "");
  int code = 1;
  if (state == "succeeded") code = 0;
  else if (state == "failed") code = std::max<int64_t>(1, std::min<int64_t>(255, json_int(job, "exit_code").value_or(1)));
  else if (state == "timeout") code = 124;
  else if (state == "cancelled") code = cancelled_by == SIGTERM ? 143 : 130;
  if (state != "succeeded") {
    std::string why = state;
    if (!json_text(job, "exit", "").empty() && state == "failed") why += " (ExitCode " + json_text(job, "exit") + ")";
    const std::string reason = json_text(job, "reason", "");
    if (!reason.empty()) why += ": " + reason;
    std::cerr << "tessera run: job " << ref << " " << why << "; exit status " << code << "\n";
  }
  if (code != 0) throw CLI::RuntimeError(code);
}

}  // namespace

void register_run(CLI::App& app) {
  auto a = std::make_shared<RunArgs>();
  CLI::App* cmd = app.add_subcommand(
      "run",
      "Run a command as a job in the foreground, as srun: wait for its start, stream task 0's output (--all-tasks: every "
      "task's), cancel it on Ctrl-C, exit with its exit code");
  a->s.command_opt = cmd->add_option("COMMAND", a->s.command, "the command and its arguments (after --)")->allow_extra_args(true);
  add_submit_flags(cmd, a->s, /*batch_flags=*/false);
  cmd->add_flag("--all-tasks", a->all_tasks, "stream every task's output, each line prefixed with [TASK]");
  cmd->add_flag("--pty", a->pty, "an interactive terminal (not supported yet)");
  cmd->callback([a] { run_run(*a); });
}

}  // namespace tessera::cli
