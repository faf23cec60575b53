// `tessera history` (as sacct): jobs that ended in a time window (--since, --until; default the last
// 24 hours), by user, queue and state, with exit code, elapsed time, GPU-hours, nodes and attempts.
// --format picks the columns (sacct's names work too: jobname, partition, exitcode, nodelist, ...);
// --csv and --json print machine-readable output. Usage errors exit 2, failures 1. Single-threaded.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <iostream>
#include <memory>
#include <set>

#include "cli/client_args.h"
#include "cli/client_util.h"
#include "cli/commands.h"
#include "cli/format.h"
#include "cli/slurm_time.h"

namespace tessera::cli {
namespace {

using nlohmann::json;

struct HistoryArgs {
  ConnArgs conn;
  std::string since, until, user, queue, state, name, format;
  bool me = false, csv = false;
  int64_t limit = 100000;
};

struct Column {
  std::string header;
  std::vector<std::string> names;  // what --format accepts (lower case), Tessera's first
  std::function<std::string(const json&)> value;
};

std::string text_or_dash(const json& j, const char* key) { return json_text(j, key, "-"); }

std::string nodes_of(const json& j) {
  std::set<std::string> seen;
  std::vector<std::string> out;
  for (const char* key : {"last_nodes", "nodes"}) {
    if (!out.empty()) break;
    if (!j.contains(key) || !j[key].is_array()) continue;
    for (const auto& n : j[key])
      if (n.is_string() && seen.insert(n.get<std::string>()).second) out.push_back(n.get<std::string>());
  }
  return out.empty() ? "-" : join(out, ",");
}

std::string elapsed_of(const json& j) {
  auto e = json_int(j, "elapsed_s");
  if (!e) {
    const auto s = json_int(j, "started"), f = json_int(j, "finished");
    if (s && f && *f >= *s) e = *f - *s;
  }
  return e ? format_elapsed(*e) : "-";
}

std::string gpu_hours_of(const json& j) {
  const auto s = json_int(j, "gpu_seconds");
  if (!s) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", static_cast<double>(*s) / 3600.0);
  return buf;
}

std::string time_of(const json& j, const char* key) {
  const auto t = json_int(j, key);
  return t && *t > 0 ? format_local_time(*t) : "-";
}

const std::vector<Column>& columns() {
  static const std::vector<Column> k = {
      {"JOBID", {"jobid", "ref", "id"}, [](const json& j) { return job_ref_of(j); }},
      {"NAME", {"name", "jobname"}, [](const json& j) { return text_or_dash(j, "name"); }},
      {"USER", {"user"}, [](const json& j) { return text_or_dash(j, "user"); }},
      {"QUEUE", {"queue", "partition"}, [](const json& j) { return text_or_dash(j, "queue"); }},
      {"PROJECT", {"project", "account"}, [](const json& j) { return text_or_dash(j, "project"); }},
      {"CLASS", {"class", "priority_class", "qos"}, [](const json& j) { return text_or_dash(j, "priority_class"); }},
      {"STATE", {"state"}, [](const json& j) { return text_or_dash(j, "state"); }},
      {"EXIT", {"exit", "exitcode"}, [](const json& j) { return text_or_dash(j, "exit"); }},
      {"ELAPSED", {"elapsed"}, elapsed_of},
      {"GPU_HOURS", {"gpu_hours", "gpuhours"}, gpu_hours_of},
      {"GPUS", {"gpus", "allocgpus"}, [](const json& j) { return text_or_dash(j, "gpus"); }},
      {"TASKS", {"tasks", "ntasks"}, [](const json& j) { return text_or_dash(j, "tasks"); }},
      {"NODES", {"nodes", "nodelist"}, nodes_of},
      {"ATTEMPTS", {"attempts", "attempt", "restarts"}, [](const json& j) { return text_or_dash(j, "attempt"); }},
      {"SUBMITTED", {"submitted", "submit"}, [](const json& j) { return time_of(j, "submitted"); }},
      {"STARTED", {"started", "start"}, [](const json& j) { return time_of(j, "started"); }},
      {"FINISHED", {"finished", "end"}, [](const json& j) { return time_of(j, "finished"); }},
      {"ARRAY_JOB", {"array_job", "array_job_id", "arrayjobid"}, [](const json& j) { return text_or_dash(j, "array_job_id"); }},
      {"ARRAY_TASK", {"array_task", "array_task_id", "arraytaskid"}, [](const json& j) { return text_or_dash(j, "array_task_id"); }},
      {"REASON", {"reason"}, [](const json& j) { return text_or_dash(j, "reason"); }},
  };
  return k;
}

std::string column_names() {
  std::vector<std::string> n;
  for (const Column& c : columns()) n.push_back(c.names[0]);
  return join(n, ",");
}

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

void run_history(const HistoryArgs& a) {
  const std::string verb = "history";
  const int64_t now = now_s();
  int64_t since = now - 86400, until = now;
  if (!a.since.empty()) {
    auto t = parse_past_time(a.since, now, "--since");
    if (!t.ok()) fail(verb, t.error().message, 2);
    since = *t;
  }
  if (!a.until.empty()) {
    auto t = parse_past_time(a.until, now, "--until");
    if (!t.ok()) fail(verb, t.error().message, 2);
    until = *t;
  }
  if (until < since)
    fail(verb, "--until (" + format_local_time(until) + ") is before --since (" + format_local_time(since) + ")", 2);
  check_states(verb, a.state);
  std::vector<std::string> states = split_commas(a.state);
  for (const std::string& s : states)
    if (!is_final_state(s)) fail(verb, "--state: '" + s + "' is not an end state; history lists ended jobs (succeeded, failed, cancelled, timeout); `tessera jobs --state " + s + "` lists the others", 2);
  if (states.empty()) states = {"succeeded", "failed", "cancelled", "timeout"};
  if (a.me && !a.user.empty()) fail(verb, "give --me or --user, not both", 2);
  if (a.csv && a.conn.json) fail(verb, "give --csv or --json, not both", 2);
  if (a.limit < 1) fail(verb, "--limit: must be >= 1", 2);
  std::vector<const Column*> cols;
  const std::string fmt = a.format.empty() ? "jobid,name,user,queue,state,exit,elapsed,gpu_hours,nodes,attempts" : a.format;
  for (std::string f : split_commas(fmt)) {
    for (char& c : f) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (const size_t pct = f.find('%'); pct != std::string::npos) f = f.substr(0, pct);  // sacct's name%width
    const Column* found = nullptr;
    for (const Column& c : columns())
      if (std::find(c.names.begin(), c.names.end(), f) != c.names.end()) found = &c;
    if (!found) fail(verb, "--format: unknown column '" + f + "' (known: " + column_names() + ")", 2);
    cols.push_back(found);
  }
  if (cols.empty()) fail(verb, "--format: give at least one column (known: " + column_names() + ")", 2);

  auto api = connect(verb, a.conn, 120);
  const std::string user = a.me ? whoami_user(verb, *api) : a.user;
  std::string q = "&state=" + url_encode(join(states, ",")) + "&finished_after=" + std::to_string(since) +
                  "&finished_before=" + std::to_string(until + 1);  // the API's bound is exclusive; --until is not
  if (!user.empty()) q += "&user=" + url_encode(user);
  if (!a.queue.empty()) q += "&queue=" + url_encode(a.queue);
  if (!a.name.empty()) q += "&name=" + url_encode(a.name);
  const json all = fetch_jobs(verb, *api, q, a.limit);
  // The window and filters again here: a server that ignores one must not widen the answer.
  json jobs = json::array();
  for (const json& j : all) {
    const auto f = json_int(j, "finished");
    if (!f || *f < since || *f > until) continue;
    if (std::find(states.begin(), states.end(), json_text(j, "state", "")) == states.end()) continue;
    if (!user.empty() && json_text(j, "user", "") != user) continue;
    if (!a.name.empty() && json_text(j, "name", "") != a.name) continue;
    jobs.push_back(j);
  }
  if (a.conn.json) return print_json(json{{"since", since}, {"until", until}, {"jobs", jobs}});
  if (a.csv) {
    std::vector<std::string> h;
    for (const Column* c : cols) h.push_back(c->names[0]);
    std::cout << join(h, ",") << "\n";
    for (const json& j : jobs) {
      std::vector<std::string> row;
      for (const Column* c : cols) row.push_back(csv_field(c->value(j)));
      std::cout << join(row, ",") << "\n";
    }
    return;
  }
  Table t;
  for (const Column* c : cols) {
    t.headers.push_back(c->header);
    t.right_align.push_back(c->header == "GPU_HOURS" || c->header == "ATTEMPTS" || c->header == "ELAPSED" ||
                            c->header == "GPUS" || c->header == "TASKS");
  }
  for (const json& j : jobs) {
    std::vector<std::string> row;
    for (const Column* c : cols) row.push_back(c->header == "NAME" ? truncate(c->value(j), 32) : c->value(j));
    t.rows.push_back(std::move(row));
  }
  std::cout << render_table(t);
  std::cerr << "(" << jobs.size() << (jobs.size() == 1 ? " job" : " jobs") << " ended between " << format_local_time(since)
            << " and " << format_local_time(until) << ")\n";
}

}  // namespace

void register_history(CLI::App& app) {
  auto a = std::make_shared<HistoryArgs>();
  CLI::App* cmd = app.add_subcommand("history", "Jobs that ended in a time window, as sacct: exit code, elapsed, GPU-hours, nodes");
  add_conn_options(cmd, a->conn);
  cmd->add_option("--since,-S,--starttime", a->since,
                  "window start: 2026-12-01T09:00 (local), 2026-12-01, HH:MM, now-2d, or 1d/12h (that long ago); default 1d");
  cmd->add_option("--until,-E,--endtime", a->until, "window end (same forms; default now)");
  cmd->add_option("--user,-u", a->user, "only this user's jobs");
  cmd->add_flag("--me", a->me, "only the token's user's jobs");
  cmd->add_option("--queue,-r,--partition", a->queue, "only this queue and its subtree");
  cmd->add_option("--state,-s", a->state, "only these end states: succeeded, failed, cancelled, timeout");
  cmd->add_option("--name", a->name, "only jobs of this name");
  cmd->add_option("--format,-o", a->format, "columns, comma-separated (known: " + column_names() + ")");
  cmd->add_flag("--csv", a->csv, "CSV with a header line (the --format columns)");
  cmd->add_option("--limit", a->limit, "at most this many jobs")->capture_default_str();
  cmd->callback([a] { run_history(*a); });
}

}  // namespace tessera::cli
