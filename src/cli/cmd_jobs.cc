// `tessera jobs` (as squeue: filters, --me, --name, --sort, --watch, --start) and `tessera priority`;
// register_job_verbs also registers show and logs (cmd_show.cc). Tables by default, the server's JSON
// with --json. Usage errors exit 2, failures 1. Single-threaded.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <iostream>
#include <memory>
#include <thread>

#include "cli/client_args.h"
#include "cli/client_util.h"
#include "cli/commands.h"
#include "cli/format.h"

namespace tessera::cli {
namespace {

using nlohmann::json;

struct JobsArgs {
  ConnArgs conn;
  std::string queue, user, state, name, sort = "id", watch, array;
  bool all = false, me = false, start = false;
  int limit = 1000;
  CLI::Option* watch_opt = nullptr;
};

// WAIT/REASON: how long a pending job has waited and why; "-" otherwise.
std::string wait_reason(const json& j, int64_t now) {
  if (json_text(j, "state") != "pending") return "-";
  std::string out;
  if (const auto sub = json_int(j, "submitted")) out = format_duration_short(now - *sub);
  const std::string reason = json_text(j, "reason", "");
  if (!reason.empty()) out += (out.empty() ? "" : ": ") + truncate(reason, 48);
  return out.empty() ? "-" : out;
}

std::string node_list(const json& j) {
  if (!j.contains("nodes") || !j["nodes"].is_array() || j["nodes"].empty()) return "-";
  std::vector<std::string> names;
  for (const auto& n : j["nodes"])
    if (n.is_string()) names.push_back(n.get<std::string>());
  if (names.size() > 4) {
    const size_t more = names.size() - 3;
    names.resize(3);
    names.push_back("+" + std::to_string(more));
  }
  return join(names, ",");
}

// --sort: id (ascending), submitted (oldest first), priority (the scheduler's order of pending jobs,
// queue position; then the others by id).
void sort_jobs(json& jobs, const std::string& key) {
  std::vector<json> v(jobs.begin(), jobs.end());
  auto id = [](const json& j) { return json_int(j, "id").value_or(0); };
  if (key == "submitted") {
    std::stable_sort(v.begin(), v.end(), [&](const json& a, const json& b) {
      return std::make_pair(json_int(a, "submitted").value_or(0), id(a)) < std::make_pair(json_int(b, "submitted").value_or(0), id(b));
    });
  } else if (key == "priority") {
    std::stable_sort(v.begin(), v.end(), [&](const json& a, const json& b) {
      const int64_t pa = json_int(a, "queue_position").value_or(INT64_MAX), pb = json_int(b, "queue_position").value_or(INT64_MAX);
      return std::make_pair(pa, id(a)) < std::make_pair(pb, id(b));
    });
  } else {
    std::stable_sort(v.begin(), v.end(), [&](const json& a, const json& b) { return id(a) < id(b); });
  }
  jobs = json(v);
}

// One listing: the table (or JSON) of the jobs that match, and how many more there are.
void list_once(const std::string& verb, const JobsArgs& a, ApiClient& api, const std::string& user) {
  std::string q;
  if (!a.queue.empty()) q += "&queue=" + url_encode(a.queue);
  if (!user.empty()) q += "&user=" + url_encode(user);
  if (!a.name.empty()) q += "&name=" + url_encode(a.name);
  if (!a.array.empty()) q += "&array=" + url_encode(a.array);
  if (a.start) q += "&state=pending";
  else if (!a.state.empty()) q += "&state=" + url_encode(join(split_commas(a.state), ","));
  else if (!a.all) q += "&active=true";
  int64_t total = 0, remaining = 0;
  json jobs = fetch_jobs(verb, api, q, a.limit, &total, &remaining);
  if (!a.name.empty()) {  // a server that ignores name= must not show other jobs
    json kept = json::array();
    for (const json& j : jobs)
      if (json_text(j, "name", "") == a.name) kept.push_back(j);
    if (kept.size() != jobs.size()) total = static_cast<int64_t>(kept.size()), remaining = 0;
    jobs = std::move(kept);
  }
  sort_jobs(jobs, a.start ? (a.sort == "id" ? "priority" : a.sort) : a.sort);
  if (a.conn.json) return print_json(json{{"jobs", jobs}, {"total", total}, {"remaining", remaining}});

  const int64_t now = now_s();
  Table t;
  if (a.start) {  // as squeue --start
    t.headers = {"JOBID", "NAME", "USER", "QUEUE", "POS", "START_TIME", "IN", "REASON"};
    t.right_align = {true, false, false, false, true, false, false, false};
    for (const auto& j : jobs) {
      const auto eta = json_int(j, "estimated_start");
      t.rows.push_back({job_ref_of(j), truncate(json_text(j, "name"), 32), json_text(j, "user"), json_text(j, "queue"),
                        json_text(j, "queue_position"), eta ? format_local_time(std::max(*eta, now)) : "unknown",
                        eta ? format_eta(eta, now) : "-", truncate(json_text(j, "reason", "-"), 60)});
    }
  } else {
    t.headers = {"JOBID", "NAME", "USER", "QUEUE", "CLASS", "STATE", "TASKS", "GPUS", "POS", "WAIT/REASON", "ETA", "NODES"};
    t.right_align = {true, false, false, false, false, false, true, true, true, false, false, false};
    for (const auto& j : jobs) {
      const bool pending = json_text(j, "state") == "pending";
      std::string state = json_text(j, "state");
      if (pending && j.value("held", false)) state = "pending (held)";
      t.rows.push_back({job_ref_of(j), truncate(json_text(j, "name"), 32), json_text(j, "user"), json_text(j, "queue"),
                        json_text(j, "priority_class"), state, json_text(j, "tasks"), json_text(j, "gpus"),
                        json_text(j, "queue_position"), wait_reason(j, now),
                        pending ? format_eta(json_int(j, "estimated_start"), now) : "-", node_list(j)});
    }
  }
  std::cout << render_table(t);
  // A list cut by --limit says how many more match (the server's "remaining").
  if (remaining > 0)
    std::cerr << "(" << jobs.size() << " of " << total << " jobs shown; " << remaining << " more: raise --limit (now "
              << a.limit << ") to see them)\n";
}

void run_jobs(const JobsArgs& a) {
  const std::string verb = "jobs";
  if (a.limit < 1) fail(verb, "--limit: must be >= 1", 2);
  check_states(verb, a.state);
  if (a.me && !a.user.empty()) fail(verb, "give --me or --user, not both", 2);
  if (a.sort != "id" && a.sort != "priority" && a.sort != "submitted")
    fail(verb, "--sort: '" + a.sort + "' is not a sort key; use id, priority or submitted", 2);
  if (a.start && !a.state.empty() && a.state != "pending") fail(verb, "--start lists pending jobs; drop --state", 2);
  if (!a.array.empty()) parse_job_id(verb, a.array);
  int interval = 0;
  if (a.watch_opt && a.watch_opt->count() > 0) {
    interval = 2;
    if (!a.watch.empty()) {
      try {
        size_t used = 0;
        interval = std::stoi(a.watch, &used);
        if (used != a.watch.size()) interval = 0;
      } catch (const std::exception&) {
        interval = 0;
      }
      if (interval < 1 || interval > 3600) fail(verb, "--watch: '" + a.watch + "' is not a refresh interval in seconds (1..3600)", 2);
    }
    if (a.conn.json) fail(verb, "--watch refreshes a table; it cannot be combined with --json", 2);
  }
  auto api = connect(verb, a.conn);
  const std::string user = a.me ? whoami_user(verb, *api) : a.user;
  if (interval == 0) return list_once(verb, a, *api, user);
  const bool tty = ::isatty(STDOUT_FILENO) == 1;
  for (;;) {  // until Ctrl-C
    if (tty) std::cout << "\033[H\033[2J";
    std::cout << "Every " << interval << "s: tessera jobs at " << api->base_url() << "   " << format_local_time(now_s()) << "\n\n";
    list_once(verb, a, *api, user);
    std::cout << std::flush;
    std::this_thread::sleep_for(std::chrono::seconds(interval));
    if (!tty) std::cout << "\n";
  }
}

// ---- priority ----

struct PriorityArgs {
  ConnArgs conn;
  std::string job, klass;
};

void run_priority(const PriorityArgs& a) {
  const std::string verb = "priority";
  const std::string ref = parse_job_ref(verb, a.job);
  if (a.klass.empty()) fail(verb, "CLASS: give a priority class name (e.g. production-training)", 2);
  auto api = connect(verb, a.conn);
  const ApiResponse r = call_post(verb, *api, "/api/v1/jobs/" + ref + "/priority", json{{"priority_class", a.klass}});
  if (a.conn.json) return print_json(r.body);
  std::cout << "Job " << ref << " now has priority class " << json_text(r.body, "priority_class", a.klass) << "\n";
}

}  // namespace

void register_job_verbs(CLI::App& app) {
  auto a = std::make_shared<JobsArgs>();
  CLI::App* cmd = app.add_subcommand("jobs", "List jobs (active ones by default), like squeue; `jobs show ID` shows one");
  add_conn_options(cmd, a->conn);
  cmd->add_option("--queue,-p", a->queue, "only this queue and its subtree");
  cmd->add_option("--user,-u", a->user, "only this user's jobs");
  cmd->add_flag("--me", a->me, "only the token's user's jobs");
  cmd->add_option("--name,-n", a->name, "only jobs of this name");
  cmd->add_option("--array", a->array, "only the elements of this array job");
  cmd->add_option("--state,-t", a->state, "only these states, comma-separated: " + join(job_states(), ","));
  cmd->add_flag("--all", a->all, "include finished jobs");
  cmd->add_option("--sort", a->sort, "id, priority (the scheduler's order of pending jobs) or submitted")->capture_default_str();
  cmd->add_flag("--start", a->start, "pending jobs with their expected start (local time), as squeue --start");
  a->watch_opt = cmd->add_option("--watch,-i", a->watch, "refresh every SECONDS (default 2) until Ctrl-C")->expected(0, 1);
  cmd->add_option("--limit", a->limit, "at most this many jobs")->capture_default_str();
  cmd->callback([a, cmd] {
    for (const CLI::App* sub : cmd->get_subcommands())
      if (sub->parsed()) return;  // `tessera jobs show ...` ran instead
    run_jobs(*a);
  });

  auto p = std::make_shared<PriorityArgs>();
  CLI::App* prio = app.add_subcommand("priority", "Change a job's priority class");
  add_conn_options(prio, p->conn);
  prio->add_option("JOB", p->job, "job reference")->required();
  prio->add_option("CLASS", p->klass, "the new priority class")->required();
  prio->callback([p] { run_priority(*p); });

  register_show_logs(app);
}

}  // namespace tessera::cli
