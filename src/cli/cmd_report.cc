// `tessera report chargeback|usage` (issue 7, docs/chargeback.md): thin clients of
// GET /api/v1/reports/chargeback and /api/v1/reports/usage. A table by default; --format csv prints
// the server's CSV byte for byte, --format json its JSON; --output FILE writes there instead of stdout.
// Usage errors exit 2, failures 1; messages go to stderr. Single-threaded (one command per process).
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "cli/api_client.h"
#include "cli/client_args.h"
#include "cli/commands.h"
#include "cli/format.h"

namespace tessera::cli {
namespace {

using nlohmann::json;

struct ReportArgs {
  ConnArgs conn = [] {
    ConnArgs c;
    c.timeout = 120;  // reports read the whole event log
    return c;
  }();
  std::string from, to, by, format = "table", output;
};

void add_options(CLI::App* cmd, ReportArgs& a, bool with_by) {
  add_conn_options(cmd, a.conn, /*json_flag=*/false);
  cmd->add_option("--from", a.from, "first day, YYYY-MM-DD UTC (default: the first of this month)");
  cmd->add_option("--to", a.to, "end, exclusive, YYYY-MM-DD UTC (default: now)");
  if (with_by) cmd->add_option("--by", a.by, "group rows by team,queue,project,user,model,pool (default team,project,model,pool)");
  cmd->add_option("--format", a.format, "table, csv or json")->capture_default_str();
  cmd->add_option("--output,-o", a.output, "write to FILE instead of stdout");
}

std::string query(const ReportArgs& a, bool with_by, const std::string& format) {
  std::string q = "?format=" + format;
  if (!a.from.empty()) q += "&from=" + url_encode(a.from);
  if (!a.to.empty()) q += "&to=" + url_encode(a.to);
  if (with_by && !a.by.empty()) q += "&by=" + url_encode(a.by);
  return q;
}

void emit(const std::string& verb, const ReportArgs& a, const std::string& text) {
  if (a.output.empty()) {
    std::cout << text;
    return;
  }
  std::ofstream f(a.output, std::ios::binary | std::ios::trunc);
  if (!f) fail(verb, "--output " + a.output + ": cannot write it (" + std::strerror(errno) + ")");
  f << text;
  if (!f.flush()) fail(verb, "--output " + a.output + ": write failed (" + std::strerror(errno) + ")");
}

std::string cell(const json& row, const std::string& key) {
  if (row.contains(key) && row[key].is_number_integer()) return row[key].dump();  // counts in totals
  return row.contains(key) && row[key].is_string() ? row[key].get<std::string>() : "-";
}

void run(const std::string& what, const ReportArgs& a) {
  const std::string verb = "report " + what;
  const bool with_by = what == "chargeback";
  if (a.format != "table" && a.format != "csv" && a.format != "json")
    fail(verb, "--format: unknown \"" + a.format + "\"; expected table, csv or json", 2);
  auto api = connect(verb, a.conn);
  const std::string path = "/api/v1/reports/" + what;
  if (a.format == "csv") {
    std::string body;
    const Status s = api->download(path + query(a, with_by, "csv"), [&](const char* d, size_t n) {
      body.append(d, n);
      return true;
    });
    if (!s.ok()) fail(verb, s.message());
    return emit(verb, a, body);
  }
  auto r = api->get(path + query(a, with_by, "json"));
  if (!r.ok()) fail(verb, r.error().message);
  const json& j = r->body;
  if (a.format == "json") return emit(verb, a, j.dump(2) + "\n");
  Table t;
  std::string head;
  if (with_by) {
    // dimension -> (table header, JSON column)
    static const std::vector<std::tuple<std::string, std::string, std::string>> dims = {
        {"team", "TEAM", "x_Team"},   {"queue", "QUEUE", "x_Queue"},     {"project", "PROJECT", "x_Project"},
        {"user", "USER", "x_User"}, {"model", "GPU MODEL", "x_GpuModel"}, {"pool", "POOL", "x_Pool"}};
    std::vector<std::string> keys;
    for (const json& b : j.value("by", json::array()))
      for (const auto& [name, header, col] : dims)
        if (b == name) t.headers.push_back(header), keys.push_back(col);
    const std::vector<std::pair<std::string, std::string>> cols = {
        {"ALLOC GPU-H", "x_AllocatedGpuHours"}, {"USED GPU-H", "x_UsedGpuHours"},
        {"IDLE-ALLOC", "x_IdleAllocatedGpuHours"}, {"UNMEASURED", "x_UnmeasuredGpuHours"},
        {"PREEMPTED", "x_PreemptedGpuHours"}, {"LOST", "x_LostGpuHours"},
        {"SPOT INTERRUPTED", "x_InterruptedGpuHours"}, {"INTERRUPTIONS", "x_Interruptions"},
        {"INTERRUPTED COST", "x_InterruptedCost"},
        {"IDLE SHARE", "x_IdleShareGpuHours"}, {"COST " + j.value("currency", std::string()), "BilledCost"}};
    const size_t n_dims = t.headers.size();
    for (const auto& [h, k] : cols) t.headers.push_back(h), keys.push_back(k);
    t.right_align.assign(t.headers.size(), false);
    for (size_t i = n_dims; i < t.headers.size(); ++i) t.right_align[i] = true;
    for (const json& row : j.value("rows", json::array())) {
      std::vector<std::string> line;
      for (const std::string& k : keys) line.push_back(cell(row, k));
      t.rows.push_back(line);
    }
    const json tot = j.value("totals", json::object());
    std::vector<std::string> line(n_dims, "");
    if (n_dims > 0) line[0] = "TOTAL";
    for (const char* k : {"allocated_gpu_hours", "used_gpu_hours", "idle_allocated_gpu_hours", "unmeasured_gpu_hours",
                          "preempted_gpu_hours", "lost_gpu_hours", "interrupted_gpu_hours", "interruptions",
                          "interrupted_cost", "idle_share_gpu_hours", "billed_cost"})
      line.push_back(cell(tot, k));
    t.rows.push_back(line);
    head = "Chargeback " + cell(j, "charge_period_start") + " .. " + cell(j, "charge_period_end") +
           " (idle share: " + cell(j, "idle_share") + ")\n";
  } else {
    t.headers = {"GPU MODEL", "POOL", "GPUS", "CAPACITY GPU-H", "ALLOCATED", "IDLE", "RESERVED", "DOWN", "ALLOC %",
                 "IDLE %", "RESERVED %", "DOWN %", "SPOT INTERRUPTED", "INTERRUPTIONS"};
    const std::vector<std::string> keys = {"gpu_model", "pool", "gpus", "capacity_gpu_hours", "allocated_gpu_hours",
                                           "idle_gpu_hours", "reserved_gpu_hours", "down_gpu_hours", "allocated_pct",
                                           "idle_pct", "reserved_pct", "down_pct", "interrupted_gpu_hours",
                                           "interruptions"};
    t.right_align.assign(t.headers.size(), true);
    t.right_align[0] = t.right_align[1] = false;
    std::vector<json> rows = j.value("rows", std::vector<json>());
    rows.push_back(j.value("totals", json::object()));
    for (const json& row : rows) {
      std::vector<std::string> line;
      for (const std::string& k : keys) line.push_back(cell(row, k));
      t.rows.push_back(line);
    }
    head = "Usage " + cell(j, "charge_period_start") + " .. " + cell(j, "charge_period_end") + "\n";
  }
  emit(verb, a, head + render_table(t));
  // Why the report is empty or its costs 0 (the server's notes: no usage yet, no chargeback.rates).
  for (const json& n : j.value("notes", json::array()))
    if (n.is_string()) std::cerr << "note: " << n.get<std::string>() << "\n";
}

}  // namespace

void register_report(CLI::App& app) {
  CLI::App* report = app.add_subcommand("report", "chargeback and usage reports (docs/chargeback.md)");
  report->require_subcommand(1);
  for (const std::string what : {"chargeback", "usage"}) {
    auto args = std::make_shared<ReportArgs>();
    CLI::App* cmd = report->add_subcommand(
        what, what == "chargeback" ? "GPU-hours and cost per team/project/user/model/pool"
                                   : "cluster utilisation per GPU model: allocated, idle, reserved, down");
    add_options(cmd, *args, what == "chargeback");
    cmd->callback([what, args] { run(what, *args); });
  }
}

}  // namespace tessera::cli
