// `tessera show JOB [--attempt N]` (also `tessera jobs show`): one job in detail, or one of its
// attempts from its events (where it ran, how it ended); and `tessera logs JOB [--task K] [--attempt
// N] [-f]`. Usage errors exit 2, failures 1. Single-threaded.
#include <algorithm>
#include <chrono>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <thread>

#include "cli/client_args.h"
#include "cli/client_util.h"
#include "cli/commands.h"
#include "cli/format.h"

namespace tessera::cli {
namespace {

using nlohmann::json;

struct ShowArgs {
  ConnArgs conn;
  std::string job;
  int attempt = 0;  // 0 = the job as it is now
};

std::string time_and_relative(const json& obj, const char* key, int64_t now) {
  const auto t = json_int(obj, key);
  if (!t || *t == 0) return "-";
  return format_local_time(*t) + " (" + format_relative(*t, now) + ")";
}

// An event's detail as "key=value ..." (a detail stored as a JSON string is parsed first).
void print_placement(const json& placement) {
  Table t;
  t.headers = {"TASK", "NODE", "GPUS", "SHARE", "MIG"};
  t.right_align = {true, false, false, true, false};
  for (const auto& p : placement) {
    std::vector<std::string> gpus;
    if (p.contains("gpus") && p["gpus"].is_array())
      for (const auto& g : p["gpus"]) gpus.push_back(g.dump());
    std::string mig = "-";
    if (p.contains("mig") && p["mig"].is_object())
      mig = json_text(p["mig"], "profile") + " on GPU " + json_text(p["mig"], "gpu") + " (start " + json_text(p["mig"], "start") + ")";
    const auto milli = json_int(p, "gpu_milli");
    t.rows.push_back({json_text(p, "task"), json_text(p, "node"), gpus.empty() ? "-" : join(gpus, ","),
                      milli ? format_gpus(*milli) : "-", mig});
  }
  for (const std::string& l : render_table_lines(t)) std::cout << "  " << l << "\n";
}

// An event's detail as an object (a detail stored as a JSON string is parsed).
json detail_of(const json& e) {
  json d = e.value("detail", json());
  if (d.is_string()) {
    json parsed = json::parse(d.get<std::string>(), nullptr, /*allow_exceptions=*/false);
    if (parsed.is_object()) return parsed;
  }
  return d.is_object() ? d : json::object();
}

bool ends_attempt(const std::string& kind) {
  static const std::vector<std::string> k = {"succeeded", "failed", "cancelled", "timed_out", "preempted", "lost", "interrupted"};
  return std::find(k.begin(), k.end(), kind) != k.end();
}

// Attempt N of a job from its events: the "started" event that carries {"attempt": N, "placement"},
// and the events up to the next start (the end-of-attempt event among them says how it ended).
void show_attempt(const std::string& verb, const json& j, int attempt, bool as_json) {
  const json events = j.value("events", json::array());
  int64_t last = 0;
  size_t begin = events.size();
  for (size_t i = 0; i < events.size(); ++i) {
    if (json_text(events[i], "kind", "") != "started") continue;
    const auto n = json_int(detail_of(events[i]), "attempt");
    if (n) last = std::max(last, *n);
    if (n && *n == attempt && begin == events.size()) begin = i;
  }
  if (begin == events.size())
    fail(verb, "--attempt " + std::to_string(attempt) + ": job " + job_ref_of(j) +
                   (last > 0 ? " has attempts 1.." + std::to_string(last) : " has not started yet"), 2);
  json own = json::array();
  json end;
  for (size_t i = begin; i < events.size(); ++i) {
    if (i > begin && json_text(events[i], "kind", "") == "started") break;
    own.push_back(events[i]);
    if (end.is_null() && ends_attempt(json_text(events[i], "kind", ""))) end = events[i];
  }
  const json start_detail = detail_of(events[begin]);
  const int64_t started = json_int(events[begin], "time").value_or(0);
  const int64_t ended = end.is_null() ? -1 : json_int(end, "time").value_or(-1);
  if (as_json) {
    return print_json(json{{"job", j.value("id", json())}, {"ref", job_ref_of(j)}, {"attempt", attempt}, {"started", started},
                           {"ended", ended >= 0 ? json(ended) : json()}, {"end", end.is_null() ? json() : end.value("kind", json())},
                           {"placement", start_detail.value("placement", json::array())}, {"events", own}});
  }
  const int64_t now = now_s();
  std::cout << "Job " << job_ref_of(j) << "  " << json_text(j, "name") << "  attempt " << attempt << " of " << last << "\n";
  std::cout << "  Started:     " << format_local_time(started) << " (" << format_relative(started, now) << ")\n";
  if (ended >= 0) {
    const json d = detail_of(end);
    std::string how = json_text(end, "kind");
    if (!compact_detail(d).empty()) how += ": " + truncate(compact_detail(d), 160);
    std::cout << "  Ended:       " << format_local_time(ended) << " (" << format_relative(ended, now) << "), after "
              << format_duration_short(ended - started) << "\n";
    std::cout << "  How:         " << how << "\n";
  } else {
    std::cout << "  Ended:       - (this attempt is " << json_text(j, "state") << ", for " << format_duration_short(now - started) << ")\n";
  }
  if (start_detail.contains("placement") && start_detail["placement"].is_array() && !start_detail["placement"].empty()) {
    std::cout << "Placement:\n";
    print_placement(start_detail["placement"]);
  }
  std::cout << "Events:\n";
  Table t;
  t.headers = {"TIME", "EVENT", "BY", "DETAIL"};
  for (const auto& e : own) {
    json d = detail_of(e);
    if (json_text(e, "kind", "") == "started") d.erase("placement");
    t.rows.push_back({format_local_time(json_int(e, "time").value_or(0)), json_text(e, "kind"), json_text(e, "actor"),
                      truncate(compact_detail(d), 100)});
  }
  for (const std::string& l : render_table_lines(t)) std::cout << "  " << l << "\n";
}

void run_show(const std::string& verb, const ShowArgs& a) {
  const std::string ref = parse_job_ref(verb, a.job);
  if (a.attempt < 0) fail(verb, "--attempt: must be an attempt number (1, 2, ...)", 2);
  auto api = connect(verb, a.conn);
  const json j = call_get(verb, *api, "/api/v1/jobs/" + ref);
  if (a.attempt > 0) return show_attempt(verb, j, a.attempt, a.conn.json);
  if (a.conn.json) return print_json(j);
  const int64_t now = now_s();
  const json spec = j.contains("spec") && j["spec"].is_object() ? j["spec"] : json::object();
  auto line = [](const std::string& label, const std::string& value) {
    std::cout << "  " << label << std::string(label.size() < 13 ? 13 - label.size() : 1, ' ') << value << "\n";
  };
  std::cout << "Job " << job_ref_of(j) << "  " << json_text(j, "name") << "\n";
  line("State:", json_text(j, "state") +
                     (j.contains("exit_code") && !j["exit_code"].is_null()
                          ? " (exit code " + json_text(j, "exit_code") + ", ExitCode " + json_text(j, "exit") + " as code:signal)"
                          : ""));
  if (const std::string st = json_text(j, "state"); (st == "running" || st == "checkpointing") && !json_text(j, "reason", "").empty())
    line("Reason:", json_text(j, "reason"));  // e.g. an agentless server: nothing runs it
  if (const auto parent = json_int(j, "array_job_id"))
    line("Array:", "element " + json_text(j, "array_task_id") + " of array job " + std::to_string(*parent) + " (job id " +
                       json_text(j, "id") + ")" + (spec.contains("array") ? ", array " + json_text(spec, "array") : ""));
  if (j.value("held", false)) line("Held:", "yes, by " + json_text(j, "held_by") + " (`tessera release " + job_ref_of(j) + "`)");
  if (!json_text(j, "dependency", "").empty())
    line("Depends on:", json_text(j, "dependency") + (spec.value("kill_on_invalid_dep", false) ? " (cancelled if never satisfied)" : ""));
  if (const auto b = json_int(j, "begin"); b && *b > 0) line("Begin:", format_local_time(*b) + " (" + format_relative(*b, now) + ")");
  if (!json_text(spec, "output", "").empty()) line("Output:", json_text(spec, "output"));
  if (!json_text(spec, "error", "").empty()) line("Error:", json_text(spec, "error"));
  if (const auto at = json_int(j, "attempt"); at && *at > 0)
    line("Attempt:", std::to_string(*at) + (*at > 1 ? " (earlier ones: tessera show " + job_ref_of(j) + " --attempt N)" : ""));
  line("User:", json_text(j, "user"));
  line("Queue:", json_text(j, "queue") + "   project: " + json_text(j, "project"));
  line("Class:", json_text(j, "priority_class") + "   kind: " + json_text(spec, "kind"));
  const std::string min_tasks = json_text(spec, "min_tasks", "0");
  line("Tasks:", json_text(j, "tasks") + (min_tasks != "0" && min_tasks != json_text(j, "tasks") ? " (at least " + min_tasks + ")" : "") +
                     " x " + describe_resources(spec.value("resources", json::object())) + "   total GPUs: " + json_text(j, "gpus"));
  if (spec.contains("topology") && json_text(spec["topology"], "mode", "none") != "none")
    line("Topology:", json_text(spec["topology"], "mode") + " within one " + json_text(spec["topology"], "level"));
  if (spec.contains("command") && spec["command"].is_array()) {
    std::vector<std::string> argv;
    for (const auto& s : spec["command"]) argv.push_back(s.is_string() ? s.get<std::string>() : s.dump());
    if (argv.size() >= 4 && argv[0] == "/bin/bash" && argv[1] == "-c" && argv[2].find('\n') != std::string::npos) {
      // A batch script (tessera submit script.sh): its name and arguments, not its text.
      const size_t lines = static_cast<size_t>(std::count(argv[2].begin(), argv[2].end(), '\n'));
      std::vector<std::string> args(argv.begin() + 4, argv.end());
      line("Command:", truncate("batch script " + argv[3] + " (" + std::to_string(lines) + " lines, run by /bin/bash)" +
                                    (args.empty() ? "" : " " + join(args, " ")), 200));
    } else {
      for (std::string& s : argv)
        for (size_t p; (p = s.find('\n')) != std::string::npos;) s.replace(p, 1, "\\n");
      line("Command:", truncate(join(argv, " "), 200));
    }
  }
  if (!json_text(spec, "working_dir", "").empty()) line("Workdir:", json_text(spec, "working_dir"));
  if (spec.contains("env") && spec["env"].is_object() && !spec["env"].empty()) line("Env:", truncate(compact_detail(spec["env"]), 200));
  if (spec.contains("container") && spec["container"].is_object()) {
    const json& c = spec["container"];
    std::string text = json_text(c, "image");
    if (!json_text(c, "user").empty()) text += ", user " + json_text(c, "user");
    if (json_text(c, "network", "host") != "host") text += ", network " + json_text(c, "network");
    line("Container:", truncate(text, 200));
  }
  if (spec.contains("mounts") && spec["mounts"].is_array())
    for (const json& m : spec["mounts"]) {
      if (!m.is_object()) continue;
      std::string kind = "host_path";
      for (const char* k : {"dataset", "volume"})
        if (m.contains(k)) kind = k;
      const bool ro = m.contains("read_only") && m["read_only"].is_boolean() ? m["read_only"].get<bool>() : kind == "dataset";
      line("Mount:", truncate(kind + " " + json_text(m, kind.c_str()) + " at " + json_text(m, "path") + (ro ? " (read-only)" : ""), 200));
    }
  {
    std::string rt;
    if (const auto e = json_int(spec, "expected_runtime"); e && *e > 0) rt += "expected " + format_duration_short(*e);
    if (const auto m = json_int(spec, "max_runtime"); m && *m > 0) rt += (rt.empty() ? "" : ", ") + std::string("max ") + format_duration_short(*m);
    if (!rt.empty()) line("Runtime:", rt);
  }
  if (spec.contains("checkpoint") && json_int(spec["checkpoint"], "interval").value_or(0) > 0) {
    const json& c = spec["checkpoint"];
    line("Checkpoint:", "every " + format_duration_short(json_int(c, "interval").value_or(0)) + ", signal " + json_text(c, "signal") +
                            ", grace " + format_duration_short(json_int(c, "grace").value_or(0)) +
                            (json_text(c, "dir", "").empty() ? "" : ", dir " + json_text(c, "dir")));
  }
  if (spec.value("spot_tolerant", false)) line("Spot:", "tolerant (may run on preemptible capacity)");
  line("Submitted:", time_and_relative(j, "submitted", now));
  line("Started:", time_and_relative(j, "started", now));
  line("Finished:", time_and_relative(j, "finished", now));
  if (const auto p = json_int(j, "preemptions"); p && *p > 0) line("Preemptions:", std::to_string(*p));
  if (const auto r = json_int(j, "restarts"); r && *r > 0)
    line("Restarts:", std::to_string(*r) + " of " + std::to_string(spec.contains("restart") ? json_int(spec["restart"], "max_restarts").value_or(0) : 0));
  if (j.contains("resume_from") && j["resume_from"].is_string()) line("Resumes from:", j["resume_from"].get<std::string>());
  if (const auto si = json_int(j, "spot_interruptions"); si && *si > 0)
    line("Spot:", "interrupted " + std::to_string(*si) + (*si == 1 ? " time" : " times") +
                      (j.contains("spot_avoid") ? " (now prefers other pools)" : ""));
  if (const auto cm = json_int(j, "checkpoint_cost_ms"); cm && *cm >= 0)
    line("Ckpt cost:", std::to_string((*cm + 999) / 1000) + " s (measured, request to .ack)");

  if (j.contains("pending") && j["pending"].is_object()) {
    const json& p = j["pending"];
    std::cout << "Pending:\n";
    line("Reason:", json_text(p, "reason"));
    line("Position:", json_text(p, "queue_position") + " in its queue, " + json_text(p, "overall_position") + " overall");
    const auto eta = json_int(p, "estimated_start");
    line("ETA:", eta ? format_eta(eta, now) + " (" + format_local_time(*eta) + ")" : "-");
    line("Reserved:", json_text(p, "reserved", "no"));
  }
  if (j.contains("placement") && j["placement"].is_array() && !j["placement"].empty()) {
    std::cout << "Placement:\n";
    print_placement(j["placement"]);
  }
  if (j.contains("events") && j["events"].is_array() && !j["events"].empty()) {
    std::cout << "Events:\n";
    Table t;
    t.headers = {"TIME", "EVENT", "BY", "DETAIL"};
    for (const auto& e : j["events"])
      t.rows.push_back({format_local_time(json_int(e, "time").value_or(0)), json_text(e, "kind"), json_text(e, "actor"),
                        truncate(compact_detail(e.value("detail", json())), 160)});
    for (const std::string& l : render_table_lines(t)) std::cout << "  " << l << "\n";
  }
}


// ---- logs ----

struct LogsArgs {
  ConnArgs conn;
  std::string job;
  int task = 0, attempt = 0;
  bool follow = false;
};

// Prints the task's log from the node that ran it (the controller fetches it from the agent);
// with -f, keeps printing new output until the job has ended and the log has no more. --attempt N
// asks for an earlier attempt's log (the server says which attempt it answered).
void run_logs(const LogsArgs& a) {
  const std::string verb = "logs";
  const std::string ref = parse_job_ref(verb, a.job);
  if (a.task < 0) fail(verb, "--task: must be a task index (0, 1, ...)", 2);
  if (a.attempt < 0) fail(verb, "--attempt: must be an attempt number (1, 2, ...)", 2);
  auto api = connect(verb, a.conn);
  int64_t offset = 0;
  int64_t attempt = -1;
  for (;;) {
    // Which attempt runs now: a new attempt (after a requeue) starts a new log.
    auto job = api->get("/api/v1/jobs/" + ref);
    if (!job.ok()) fail(verb, job.error().message);
    const int64_t now_attempt = job->body.value("attempt", int64_t(0));
    if (a.attempt > 0 && a.attempt > now_attempt)
      fail(verb, "--attempt " + std::to_string(a.attempt) + ": job " + ref + " has had " + std::to_string(now_attempt) +
                     (now_attempt == 1 ? " attempt" : " attempts"), 2);
    const bool old_attempt = a.attempt > 0 && a.attempt < now_attempt;
    if (a.attempt == 0 && attempt >= 0 && now_attempt != attempt) {
      std::cout << "--- attempt " << now_attempt << " ---\n";
      offset = 0;
    }
    attempt = a.attempt > 0 ? a.attempt : now_attempt;
    const bool ended = is_final_state(job->body.value("state", "")) || old_attempt;
    int64_t got = 0;
    std::map<std::string, std::string> headers;
    std::string path = "/api/v1/jobs/" + ref + "/logs?task=" + std::to_string(a.task) + "&offset=" + std::to_string(offset);
    if (a.attempt > 0) path += "&attempt=" + std::to_string(a.attempt);
    std::string buffered;  // an old attempt's bytes wait until the server says which attempt they are
    Status st = api->download(
        path,
        [&](const char* data, size_t n) {
          if (old_attempt) buffered.append(data, n);
          else std::cout.write(data, std::streamsize(n));
          got += int64_t(n);
          return true;
        },
        &headers);
    if (st.ok() && a.attempt > 0 && headers.count("X-Tessera-Attempt") && headers["X-Tessera-Attempt"] != std::to_string(a.attempt))
      fail(verb, "--attempt " + std::to_string(a.attempt) + ": the server answered attempt " + headers["X-Tessera-Attempt"] +
                     "'s log; this server keeps only the latest attempt's log reachable");
    std::cout << buffered;
    std::cout.flush();
    if (!st.ok()) {
      // Not started yet, or the node is away for a moment: -f waits; otherwise say why.
      if (!a.follow || ended) fail(verb, st.message());
    }
    offset += got;
    if (!a.follow || (ended && got == 0 && st.ok())) return;
    if (got == 0) std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
}

}  // namespace

void register_show_logs(CLI::App& app) {
  for (CLI::App* parent : {&app, app.get_subcommand("jobs")}) {
    auto a = std::make_shared<ShowArgs>();
    CLI::App* cmd = parent->add_subcommand("show", "Show one job in detail: spec, state, placement, why it waits, events");
    add_conn_options(cmd, a->conn);
    cmd->add_option("JOB", a->job, "job reference: 17 or 12_3")->required();
    cmd->add_option("--attempt", a->attempt, "show attempt N (1 = the first start): where it ran, how it ended, its events");
    const std::string verb = parent == &app ? "show" : "jobs show";
    cmd->callback([a, verb] { run_show(verb, *a); });
  }

  auto a = std::make_shared<LogsArgs>();
  CLI::App* cmd = app.add_subcommand("logs", "Print a task's output (stdout and stderr) from the node that ran it");
  add_conn_options(cmd, a->conn);
  cmd->add_option("JOB", a->job, "job reference: 17 or 12_3")->required();
  cmd->add_option("--task", a->task, "task index (rank)")->capture_default_str();
  cmd->add_option("--attempt", a->attempt, "an earlier attempt's log (default: the latest)");
  cmd->add_flag("-f,--follow", a->follow, "keep printing new output until the job ends");
  cmd->callback([a] { run_logs(*a); });
}

}  // namespace tessera::cli
