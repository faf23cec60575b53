// The verbs that act on jobs by reference, as scancel and scontrol do: `tessera cancel`, `hold`,
// `release`, `requeue [--hold]`. A reference is a job id (17), an array job id (12: every element)
// or an element (12_3). `cancel` also selects jobs by filters (--me, --user, --state, --name,
// --queue) and sends a signal instead with --signal. One line per job on stdout; jobs that could not
// be acted on go to stderr and make the exit status 1. Usage errors exit 2.
#include <algorithm>
#include <cctype>
#include <iostream>
#include <memory>
#include <tuple>

#include "cli/client_args.h"
#include "cli/client_util.h"
#include "cli/commands.h"
#include "cli/format.h"

namespace tessera::cli {
namespace {

using nlohmann::json;

// What each verb does, in words for its output lines.
struct Action {
  std::string verb;     // "hold"
  std::string path;     // "hold": POST /api/v1/jobs/{ref}/hold
  std::string done;     // "Held"
};

// One job's line from its record after `act`.
std::string job_line(const Action& act, const json& rec) {
  const std::string ref = job_ref_of(rec);
  const std::string state = json_text(rec, "state", "");
  if (act.path == "cancel") {
    if (state == "cancelled" || state.empty()) return "Cancelled job " + ref;
    return "Cancelling job " + ref + " (" + state + "; its agents are stopping it)";
  }
  if (act.path == "requeue") {
    const bool held = rec.value("held", false);
    if (state == "pending") return "Requeued job " + ref + (held ? " (held)" : "");
    return "Requeueing job " + ref + " (" + state + (held ? ", will be held" : "") + "; it is being stopped and goes back to pending)";
  }
  if (act.path == "signal") return "Signalled job " + ref;
  return act.done + " job " + ref + (state.empty() || state == "pending" ? "" : " (" + state + ")");
}

// POSTs `act` to each reference; prints one line per job (array answers: each element changed, each
// skipped with why). Returns false when any reference failed.
bool act_on_refs(const Action& act, ApiClient& api, const std::vector<std::string>& refs, const json& body, bool as_json) {
  bool ok = true;
  json answers = json::array();
  for (const std::string& ref : refs) {
    auto r = api.post("/api/v1/jobs/" + ref + "/" + act.path, body);
    if (!r.ok()) {
      std::cerr << "tessera " << act.verb << ": job " << ref << ": " << r.error().message << "\n";
      ok = false;
      continue;
    }
    if (as_json) {
      answers.push_back(r->body);
      continue;
    }
    if (r->body.contains("jobs") && r->body["jobs"].is_array()) {  // an array job: its elements
      for (const json& rec : r->body["jobs"]) std::cout << job_line(act, rec) << "\n";
      for (const json& s : r->body.value("skipped", json::array()))
        std::cout << "Skipped job " << json_text(s, "ref") << ": " << json_text(s, "reason") << "\n";
      if (r->body["jobs"].empty() && r->body.value("skipped", json::array()).empty())
        std::cout << "Array job " << ref << ": no element to " << act.verb << "\n";
      continue;
    }
    std::cout << job_line(act, r->body) << "\n";
  }
  if (as_json) print_json(answers.size() == 1 ? answers[0] : answers);
  return ok;
}

// ---- hold, release, requeue ----

struct RefArgs {
  ConnArgs conn;
  std::vector<std::string> refs;
  bool hold = false;  // requeue --hold
};

void run_ref_action(const Action& act, const RefArgs& a) {
  std::vector<std::string> refs;
  for (const std::string& s : a.refs) refs.push_back(parse_job_ref(act.verb, s));
  auto api = connect(act.verb, a.conn);
  json body = json::object();
  if (a.hold) body["hold"] = true;
  if (!act_on_refs(act, *api, refs, body, a.conn.json)) throw CLI::RuntimeError(1);
}

// ---- cancel ----

struct CancelArgs {
  ConnArgs conn;
  std::vector<std::string> jobs;
  bool me = false;
  std::string user, state, name, queue, signal;
};

// "USR1", "SIGUSR1", "usr1" or a number as the name the API takes ("USR1"); "" if unknown.
std::string signal_name(std::string s) {
  static const std::vector<std::pair<std::string, int>> k = {
      {"HUP", 1}, {"INT", 2}, {"QUIT", 3}, {"ABRT", 6}, {"KILL", 9}, {"USR1", 10}, {"SEGV", 11}, {"USR2", 12},
      {"PIPE", 13}, {"ALRM", 14}, {"TERM", 15}, {"CONT", 18}, {"STOP", 19}, {"TSTP", 20}, {"URG", 23}, {"XCPU", 24},
      {"WINCH", 28}};
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (s.rfind("SIG", 0) == 0) s = s.substr(3);
  for (const auto& [name, num] : k)
    if (s == name || s == std::to_string(num)) return name;
  return {};
}

void run_cancel(const CancelArgs& a) {
  const std::string verb = "cancel";
  const bool filters = a.me || !a.user.empty() || !a.state.empty() || !a.name.empty() || !a.queue.empty();
  if (filters && !a.jobs.empty())
    fail(verb, "give job references or filters (--me, --user, --state, --name, --queue), not both", 2);
  if (!filters && a.jobs.empty())
    fail(verb, "JOB: give job references (17, 12 for a whole array, 12_3) or select jobs with --me, --user, --name, --queue "
               "and --state", 2);
  if (filters && !a.me && a.user.empty() && a.name.empty() && a.queue.empty())
    fail(verb, "--state alone would act on everyone's jobs; add --me, --user, --name or --queue", 2);
  if (a.me && !a.user.empty()) fail(verb, "give --me or --user, not both", 2);
  check_states(verb, a.state);
  std::string sig;
  if (!a.signal.empty()) {
    sig = signal_name(a.signal);
    if (sig.empty()) fail(verb, "--signal: '" + a.signal + "' is not a signal; use a name such as USR1, TERM, INT, KILL or its number", 2);
  }
  std::vector<std::string> refs;
  for (const std::string& s : a.jobs) refs.push_back(parse_job_ref(verb, s));
  auto api = connect(verb, a.conn);
  if (filters) {
    const std::string user = a.me ? whoami_user(verb, *api) : a.user;
    std::string q;
    if (!user.empty()) q += "&user=" + url_encode(user);
    if (!a.queue.empty()) q += "&queue=" + url_encode(a.queue);
    if (!a.name.empty()) q += "&name=" + url_encode(a.name);
    if (!a.state.empty()) q += "&state=" + url_encode(join(split_commas(a.state), ","));
    else q += "&active=true";
    const json jobs = fetch_jobs(verb, *api, q, 100000);
    const std::vector<std::string> states = split_commas(a.state);
    for (const json& j : jobs) {
      const std::string st = json_text(j, "state", "");
      // The server filters; this keeps a server that ignores a filter from widening the selection.
      if (!user.empty() && json_text(j, "user", "") != user) continue;
      if (!a.name.empty() && json_text(j, "name", "") != a.name) continue;
      if (states.empty() ? is_final_state(st) : std::find(states.begin(), states.end(), st) == states.end()) continue;
      refs.push_back(job_ref_of(j));
    }
    if (refs.empty()) {
      if (a.conn.json) print_json(json::array());
      else std::cout << "No job matches\n";
      return;
    }
  }
  Action act{verb, "cancel", "Cancelled"};
  json body = json::object();
  if (!sig.empty()) {
    act.path = "signal";
    body["signal"] = sig;
  }
  if (!act_on_refs(act, *api, refs, body, a.conn.json)) throw CLI::RuntimeError(1);
}

}  // namespace

void register_workflow(CLI::App& app) {
  auto c = std::make_shared<CancelArgs>();
  CLI::App* cancel = app.add_subcommand(
      "cancel", "Cancel jobs (pending: at once; running: stopped by their agents), by reference or by filters, like scancel");
  add_conn_options(cancel, c->conn);
  cancel->add_option("JOB", c->jobs, "job references: 17, 12 (every element of array job 12), 12_3");
  cancel->add_flag("--me", c->me, "the jobs of the token's user");
  cancel->add_option("--user,-u", c->user, "the jobs of this user");
  cancel->add_option("--state,-t", c->state, "only jobs in these states (default: active ones), e.g. pending");
  cancel->add_option("--name,-n", c->name, "only jobs of this name");
  cancel->add_option("--queue,-p", c->queue, "only jobs of this queue and its subtree");
  cancel->add_option("--signal,-s", c->signal, "send this signal to the running tasks (USR1, TERM, ...) instead of cancelling");
  cancel->callback([c] { run_cancel(*c); });

  const std::vector<std::tuple<std::string, std::string, std::string>> verbs = {
      {"hold", "Held", "Hold pending jobs: they are not started until released (as scontrol hold)"},
      {"release", "Released", "Release held jobs (as scontrol release)"},
      {"requeue", "Requeued",
       "Stop running jobs (checkpointing those that support it) and put them back to pending (as scontrol requeue)"}};
  for (const auto& [name, done, help] : verbs) {
    auto a = std::make_shared<RefArgs>();
    CLI::App* cmd = app.add_subcommand(name, help);
    add_conn_options(cmd, a->conn);
    cmd->add_option("JOB", a->refs, "job references: 17, 12 (every element of array job 12), 12_3")->required();
    if (name == "requeue") cmd->add_flag("--hold", a->hold, "hold the job once requeued (as scontrol requeuehold)");
    const Action act{name, name, done};
    cmd->callback([act, a] { run_ref_action(act, *a); });
  }
}

}  // namespace tessera::cli
