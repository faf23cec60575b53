// The infrastructure client verbs of `tessera` (queues, nodes, cordon, drain, resume, interrupt,
// token, whoami): thin clients of the REST API (docs/api.md) through ApiClient. Tables by default, the server's JSON with --json. Usage errors exit 2, failures 1; every
// message goes to stderr and says what to fix. Single-threaded (one command per process).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <iostream>
#include <map>
#include <memory>

#include "cli/api_client.h"
#include "cli/client_args.h"
#include "cli/client_util.h"
#include "cli/commands.h"
#include "cli/format.h"

namespace tessera::cli {
namespace {

using nlohmann::json;

// ---- queues ----

void run_queues(const ConnArgs& c) {
  const std::string verb = "queues";
  auto api = connect(verb, c);
  const json body = call_get(verb, *api, "/api/v1/queues");
  if (c.json) return print_json(body);
  if (!body.contains("queues") || !body["queues"].is_array())
    fail(verb, "the server's answer has no \"queues\" array; is " + api->base_url() + " a Tessera server of this version?");
  const json& queues = body["queues"];
  // Every class name shown, to shorten them consistently.
  std::vector<std::string> classes;
  for (const auto& q : queues)
    for (const char* k : {"guaranteed", "limit", "used", "borrowed", "fair_share"})
      if (q.contains(k) && q[k].is_object())
        for (const auto& [name, v] : q[k].items())
          if (std::find(classes.begin(), classes.end(), name) == classes.end()) classes.push_back(name);
  // Tree order: each queue after its parent, siblings in the server's order.
  std::map<std::string, std::vector<size_t>> children;
  std::vector<size_t> roots;
  std::map<std::string, bool> known;
  for (const auto& q : queues) known[json_text(q, "name", "")] = true;
  for (size_t i = 0; i < queues.size(); ++i) {
    const std::string parent = json_text(queues[i], "parent", "");
    if (parent.empty() || !known.count(parent)) roots.push_back(i);
    else children[parent].push_back(i);
  }
  Table t;
  t.headers = {"NAME", "GUARANTEED", "LIMIT", "USED", "BORROWED", "FAIR-SHARE", "RUNNING", "PENDING"};
  t.right_align = {false, false, false, false, false, false, true, true};
  std::vector<bool> shown(queues.size(), false);
  std::function<void(size_t, int)> add = [&](size_t i, int depth) {
    if (shown[i]) return;  // a cycle in the answer: show each queue once
    shown[i] = true;
    const json& q = queues[i];
    auto amounts = [&](const char* k) { return format_class_amounts(q.value(k, json::object()), classes); };
    t.rows.push_back({std::string(2 * depth, ' ') + json_text(q, "name"), amounts("guaranteed"), amounts("limit"),
                      amounts("used"), amounts("borrowed"), amounts("fair_share"), json_text(q, "running"),
                      json_text(q, "pending")});
    for (const size_t c : children[json_text(q, "name", "")]) add(c, depth + 1);
  };
  for (const size_t r : roots) add(r, 0);
  for (size_t i = 0; i < queues.size(); ++i) add(i, 0);
  std::cout << render_table(t);
}

// ---- nodes, cordon, drain, resume ----

void run_nodes(const ConnArgs& c) {
  const std::string verb = "nodes";
  auto api = connect(verb, c);
  const json body = call_get(verb, *api, "/api/v1/nodes");
  if (c.json) return print_json(body);
  if (!body.contains("nodes") || !body["nodes"].is_array())
    fail(verb, "the server's answer has no \"nodes\" array; is " + api->base_url() + " a Tessera server of this version?");
  Table t;
  t.headers = {"NAME", "STATE", "AGENT", "MODEL", "GPUS", "UTIL", "CPU", "MEM", "REASON"};
  std::vector<std::string> maps;
  for (const auto& n : body["nodes"]) {
    int64_t used_milli = 0, count = 0, util_sum = 0, util_known = 0;
    if (n.contains("gpus") && n["gpus"].is_array())
      for (const auto& g : n["gpus"]) {
        ++count;
        used_milli += std::min<int64_t>(json_int(g, "used_milli").value_or(0), 1000);
        if (const auto u = json_int(g, "utilization_pct"); u && *u >= 0) util_sum += *u, ++util_known;
      }
    // Measured by the agent (NVML, or what runs on fake GPUs): the mean over the node's GPUs.
    const std::string util = util_known ? std::to_string(util_sum / util_known) + "%" : "-";
    auto pair = [&](const char* used, const char* total, auto fmt) {
      const auto u = json_int(n, used), tot = json_int(n, total);
      return (u ? fmt(*u) : std::string("?")) + "/" + (tot ? fmt(*tot) : std::string("?"));
    };
    std::string agent = json_text(n, "agent", "-");
    if (agent.rfind("none", 0) == 0) agent = "none";
    if (json_text(n, "gpu_source", "") == "fake") agent += " (fake)";
    // "ready" only for a node that takes work: one waiting for its agent says so.
    std::string state = json_text(n, "state");
    if (state == "ready" && n.value("takes_work", true) == false)
      state = json_text(n, "agent") == "unknown" ? "no-agent" : "not-ready";
    t.rows.push_back({json_text(n, "name"), state, agent, json_text(n, "gpu_model"),
                      format_gpus(used_milli) + "/" + std::to_string(count), util, pair("cpu_milli_used", "cpu_milli", format_cores),
                      pair("memory_mib_used", "memory_mib", format_mib), json_text(n, "reason", "")});
    maps.push_back(render_gpu_map(n.value("gpus", json::array())));
  }
  const auto lines = render_table_lines(t);
  std::cout << lines[0] << "\n";
  for (size_t i = 1; i < lines.size(); ++i) std::cout << lines[i] << "\n    " << maps[i - 1] << "\n";
}

struct NodeOpArgs {
  ConnArgs conn;
  std::string node, reason;
};

void run_node_op(const std::string& op, const NodeOpArgs& a) {
  if (a.node.empty()) fail(op, "NODE: give a node name (see `tessera nodes`)", 2);
  if (op != "resume" && a.reason.empty())
    fail(op, "--reason is required: say why, e.g. --reason 'replacing a DIMM' (it is shown in `tessera nodes`)", 2);
  auto api = connect(op, a.conn);
  json body = json::object();
  if (!a.reason.empty()) body["reason"] = a.reason;
  const ApiResponse r = call_post(op, *api, "/api/v1/nodes/" + url_encode(a.node) + "/" + op, body);
  if (a.conn.json) return print_json(r.body);
  const std::string reason = json_text(r.body, "reason", "");
  std::cout << "Node " << a.node << ": " << json_text(r.body, "state", op == "resume" ? "ready" : op + "ed")
            << (reason.empty() ? "" : " (" + reason + ")") << "\n";
}

struct InterruptArgs {
  ConnArgs conn;
  std::string node;
  int64_t notice = -1, reclaim_at = -1;
};

void run_interrupt(const InterruptArgs& a) {
  const std::string verb = "interrupt";
  if (a.notice >= 0 && a.reclaim_at >= 0) fail(verb, "give --notice or --reclaim-at, not both", 2);
  auto api = connect(verb, a.conn);
  json body = json::object();
  if (a.notice >= 0) body["notice_s"] = a.notice;
  if (a.reclaim_at >= 0) body["reclaim_at"] = a.reclaim_at;
  const ApiResponse r = call_post(verb, *api, "/api/v1/nodes/" + url_encode(a.node) + "/interruption", body);
  if (a.conn.json) return print_json(r.body);
  std::cout << "Node " << a.node << ": reclaimed in " << json_text(r.body, "notice_s") << " s (at "
            << json_text(r.body, "reclaim_at") << ")\n";
  if (r.body.contains("note")) std::cout << "  " << json_text(r.body, "note") << "\n";
  for (const auto& j : r.body.value("jobs", json::array()))
    std::cout << "  job " << json_text(j, "job") << ": " << json_text(j, "path") << " - " << json_text(j, "reason") << "\n";
}

}  // namespace

void register_infra(CLI::App& app) {
  auto qc = std::make_shared<ConnArgs>();
  CLI::App* queues = app.add_subcommand("queues", "Show the queue tree: guarantees, limits, use, borrowing, fair share");
  add_conn_options(queues, *qc);
  queues->callback([qc] { run_queues(*qc); });

  auto nc = std::make_shared<ConnArgs>();
  CLI::App* nodes = app.add_subcommand("nodes", "Show nodes, their state, use and a GPU/MIG map ('#' used, '+' shared, '.' free, 'x' unhealthy)");
  add_conn_options(nodes, *nc);
  nodes->callback([nc] { run_nodes(*nc); });

  for (const std::string op : {"cordon", "drain", "resume"}) {
    auto a = std::make_shared<NodeOpArgs>();
    const char* help = op == "cordon" ? "Stop placing new work on a node (admin)"
                       : op == "drain" ? "Checkpoint and requeue a node's jobs, then mark it drained (admin)"
                                       : "Return a cordoned or drained node to service (admin)";
    CLI::App* cmd = app.add_subcommand(op, help);
    add_conn_options(cmd, a->conn);
    cmd->add_option("NODE", a->node, "node name")->required();
    cmd->add_option("--reason", a->reason, op == "resume" ? "why (optional)" : "why (required), shown in `tessera nodes`");
    cmd->callback([op, a] { run_node_op(op, *a); });
  }

  auto ia = std::make_shared<InterruptArgs>();
  CLI::App* intr = app.add_subcommand(
      "interrupt", "Report a spot interruption notice for a node: cordon it, checkpoint or requeue its jobs (admin)");
  add_conn_options(intr, ia->conn);
  intr->add_option("NODE", ia->node, "node name (a node of a spot pool)")->required();
  intr->add_option("--notice", ia->notice, "seconds until the reclaim (default: the pool's notice)")->check(CLI::Range(0, 86400));
  intr->add_option("--reclaim-at", ia->reclaim_at, "the reclaim time, unix seconds")->check(CLI::NonNegativeNumber);
  intr->callback([ia] { run_interrupt(*ia); });
}

namespace {

// ---- token, whoami ----

struct TokenCreateArgs {
  ConnArgs conn;
  std::string user, role, queue, node;
};

void run_token_create(const TokenCreateArgs& a) {
  const std::string verb = "token create";
  static const std::vector<std::string> roles = {"admin", "team-lead", "member", "viewer", "agent"};
  if (a.user.empty()) fail(verb, "--user is required: the user the token acts as", 2);
  if (std::find(roles.begin(), roles.end(), a.role) == roles.end())
    fail(verb, "--role: '" + a.role + "' is not a role (known: " + join(roles, ", ") + ")", 2);
  const bool scoped = a.role == "team-lead" || a.role == "member";
  if (scoped && a.queue.empty()) fail(verb, "--queue is required for role " + a.role + ": the queue subtree they act in", 2);
  if (!scoped && !a.queue.empty()) fail(verb, "--queue must be empty for role " + a.role + " (only team-lead and member have one)", 2);
  if (a.role == "agent" && a.node.empty())
    fail(verb, "--node is required for role agent: the node it speaks for, or a pattern such as 'gpu-*' ('*' for every node)", 2);
  if (a.role != "agent" && !a.node.empty()) fail(verb, "--node is for agent tokens only", 2);
  auto api = connect(verb, a.conn);
  json body = {{"user", a.user}, {"role", a.role}};
  if (!a.queue.empty()) body["queue"] = a.queue;
  if (!a.node.empty()) body["node"] = a.node;
  const ApiResponse r = call_post(verb, *api, "/api/v1/tokens", body);
  if (a.conn.json) return print_json(r.body);
  const std::string token = json_text(r.body, "token", "");
  if (token.empty()) fail(verb, "the server's answer has no \"token\"; the token may have been created: check `tessera token list`");
  std::cout << token << "\n";
  std::cerr << "(token for " << a.user << ", role " << a.role << (a.queue.empty() ? "" : ", queue " + a.queue)
            << "; it is shown only this once)\n";
}

void run_token_list(const ConnArgs& c) {
  const std::string verb = "token list";
  auto api = connect(verb, c);
  const json body = call_get(verb, *api, "/api/v1/tokens");
  if (c.json) return print_json(body);
  const json list = body.is_array() ? body : body.value("tokens", json::array());
  Table t;
  t.headers = {"ID", "USER", "ROLE", "QUEUE", "NODE", "CREATED", "REVOKED"};
  for (const auto& k : list)
    t.rows.push_back({json_text(k, "id"), json_text(k, "user"), json_text(k, "role"), json_text(k, "queue", "-").empty() ? "-" : json_text(k, "queue"),
                      json_text(k, "node", "-").empty() ? "-" : json_text(k, "node", "-"),
                      format_local_time(json_int(k, "created").value_or(0)), json_text(k, "revoked", "no")});
  std::cout << render_table(t);
}

struct TokenRevokeArgs {
  ConnArgs conn;
  std::string id;
};

void run_token_revoke(const TokenRevokeArgs& a) {
  const std::string verb = "token revoke";
  auto api = connect(verb, a.conn);
  const ApiResponse r = call_post(verb, *api, "/api/v1/tokens/" + a.id + "/revoke", json::object());
  if (a.conn.json) return print_json(r.body);
  std::cout << "token " << json_text(r.body, "id") << " (user " << json_text(r.body, "user") << ") revoked\n";
}

void run_whoami(const ConnArgs& c) {
  const std::string verb = "whoami";
  auto api = connect(verb, c);
  const json body = call_get(verb, *api, "/api/v1/whoami");
  if (c.json) return print_json(body);
  const std::string queue = json_text(body, "queue", "");
  std::cout << json_text(body, "user") << " (role " << json_text(body, "role") << (queue.empty() ? "" : ", queue " + queue)
            << ") at " << api->base_url() << "\n";
}

}  // namespace

void register_tokens(CLI::App& app) {
  CLI::App* token = app.add_subcommand("token", "API tokens (admin): create, list, revoke");
  token->require_subcommand(1);
  auto ca = std::make_shared<TokenCreateArgs>();
  CLI::App* create = token->add_subcommand("create", "Create a token; prints only the token on stdout");
  add_conn_options(create, ca->conn);
  create->add_option("--user", ca->user, "user name")->required();
  create->add_option("--role", ca->role, "admin, team-lead, member, viewer or agent")->required();
  create->add_option("--queue", ca->queue, "queue subtree (team-lead and member only)");
  create->add_option("--node", ca->node, "agent only (required): the node it may register and report for, or a pattern (gpu-*)");
  create->callback([ca] { run_token_create(*ca); });

  auto lc = std::make_shared<ConnArgs>();
  CLI::App* list = token->add_subcommand("list", "List tokens (id, user, role, queue, created)");
  add_conn_options(list, *lc);
  list->callback([lc] { run_token_list(*lc); });

  auto rc = std::make_shared<TokenRevokeArgs>();
  CLI::App* revoke = token->add_subcommand("revoke", "Revoke a token by its id (from `token list`); in force at once");
  add_conn_options(revoke, rc->conn);
  revoke->add_option("id", rc->id, "the token's id")->required();
  revoke->callback([rc] { run_token_revoke(*rc); });

  auto wc = std::make_shared<ConnArgs>();
  CLI::App* whoami = app.add_subcommand("whoami", "Show who the token acts as");
  add_conn_options(whoami, *wc);
  whoami->callback([wc] { run_whoami(*wc); });
}

}  // namespace tessera::cli
