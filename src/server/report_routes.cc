// GET /api/v1/reports/chargeback and GET /api/v1/reports/usage (issue 7, docs/chargeback.md): read the
// event log and the jobs from the store, compute the ledger (server/accounting.h, pure) and answer JSON
// or CSV. What a caller sees follows their role: admin and viewer everything, a team lead the rows of
// their queue subtree, a member their own rows; agent tokens are refused. Handlers are thread-safe:
// they hold no state and reach the store and the configuration through the Controller.
#include <ctime>
#include <map>
#include <string>
#include <vector>

#include "server/accounting.h"
#include "server/permissions.h"
#include "server/route_groups.h"

namespace tessera::server {
namespace {

namespace acc = accounting;
using Json = nlohmann::json;

constexpr int64_t kPage = 50000;  // events read per store call

struct Params {
  acc::Request request;
  std::vector<acc::Dim> by;
  std::string format;  // "json" or "csv"
};

Result<Params> parse_params(const httplib::Request& req, bool with_by) {
  Params p;
  const int64_t now = int64_t(std::time(nullptr));
  p.request.now = now;
  p.request.from = acc::month_start_utc(now);
  p.request.to = now;
  if (req.has_param("from")) {
    auto f = acc::parse_utc_time(req.get_param_value("from"), "from");
    if (!f.ok()) return f.error();
    p.request.from = *f;
  }
  if (req.has_param("to")) {
    auto t = acc::parse_utc_time(req.get_param_value("to"), "to");
    if (!t.ok()) return t.error();
    p.request.to = *t;
  }
  if (p.request.to <= p.request.from)
    return invalid_argument("to: must be after from (" + acc::format_utc(p.request.from) +
                            "); `to` is exclusive: from=2026-11-01&to=2026-12-01 is November");
  p.by = acc::default_dims();
  if (with_by && req.has_param("by")) {
    auto b = acc::parse_dims(req.get_param_value("by"));
    if (!b.ok()) return b.error();
    p.by = *b;
  }
  p.format = req.has_param("format") ? req.get_param_value("format") : "json";
  if (p.format != "json" && p.format != "csv")
    return invalid_argument("format: unknown \"" + p.format + "\"; expected json or csv");
  return p;
}

// The whole log (attempts that began before `from` still count from `from`) and the jobs.
// `log_began` (if given) gets the first event's time, or -1 for an empty log.
Result<acc::Ledger> ledger(Controller& c, const acc::Request& r, int64_t* log_began = nullptr) {
  std::vector<EventRow> events;
  for (int64_t after = 0;;) {
    auto page = c.store().events_after(after, kPage);
    if (!page.ok()) return internal_error("store: " + page.error().message);
    if (page->empty()) break;
    after = page->back().seq;
    const bool last = int64_t(page->size()) < kPage;
    events.insert(events.end(), std::make_move_iterator(page->begin()), std::make_move_iterator(page->end()));
    if (last) break;
  }
  if (log_began) *log_began = events.empty() ? -1 : events.front().time;
  auto state = c.store().load();
  if (!state.ok()) return internal_error("store: " + state.error().message);
  std::map<int64_t, acc::JobInfo> jobs;
  for (const JobRow& row : state->jobs) {
    auto j = acc::job_info_from_row(row);
    jobs[row.id] = j.ok() ? *j : acc::JobInfo{row.queue, row.user, ""};  // the indexed columns at least
  }
  return acc::compute_ledger(events, jobs, c.config_snapshot(), r);
}

// Which cells the principal may see (nullptr: all).
Result<acc::CellFilter> visibility(Controller& c, const Principal& p) {
  switch (p.role) {
    case Role::kAdmin:
    case Role::kViewer: return acc::CellFilter();
    case Role::kMember: {
      const std::string user = p.user;
      return acc::CellFilter([user](const acc::Cell& cell) { return cell.user == user; });
    }
    case Role::kTeamLead: {
      auto tree = QueueTree::build(c.config_snapshot().queues);
      if (!tree.ok()) return internal_error("queues: " + tree.error().message);
      auto shared = std::make_shared<QueueTree>(std::move(*tree));
      const std::string root = p.queue;
      return acc::CellFilter([shared, root](const acc::Cell& cell) { return in_subtree(*shared, cell.queue, root); });
    }
    case Role::kAgent: break;
  }
  return permission_denied("agent tokens may not read reports");
}

// Why a report is empty (no job has held a GPU in it), or its costs 0 (the portal's wording, web/src/views/chargeback.ts): a fresh
// cluster has nothing to show, and costs stay 0 until `chargeback.rates` is set.
Json empty_notes(const acc::Ledger& L, int64_t log_began, bool no_rows, const Principal& p) {
  Json notes = Json::array();
  if (!no_rows) return notes;
  const std::string mine = p.role == Role::kTeamLead ? " You see only the rows of your queue subtree (" + p.queue + ")."
                           : p.role == Role::kMember ? " You see only your own usage." : "";
  if (log_began >= 0 && L.to < log_began)  // the whole period is before the log's first event
    notes.push_back("No usage in this period: it lies before the cluster's event log began (or in the future), so nothing "
                    "was recorded for it. Pick a period after " + acc::format_utc(log_began) + "." + mine);
  else
    notes.push_back("No usage yet in this period (" + acc::format_utc(L.start < L.end ? L.start : L.from) + " – " +
                    acc::format_utc(L.start < L.end ? L.end : L.to) +
                    "): no job has held a GPU in it. GPU-hours are counted from the moment a job starts on a GPU until "
                    "its attempt ends (finished or still running); a fresh cluster, or one whose jobs are all still "
                    "pending, has no finished or running usage yet." + mine);
  return notes;
}

Json chargeback_notes(const acc::Ledger& L, int64_t log_began, const acc::Report& rep, const Principal& p) {
  Json notes = empty_notes(L, log_began, rep.totals.allocated == 0, p);  // idle-share rows alone are no usage
  if (L.rates_micro.empty() && L.pool_rates_micro.empty()) {
    notes.push_back("Costs are 0 because no GPU rates are configured. Set chargeback.rates in the cluster config (a price "
                    "per GPU-hour for each GPU model, e.g. chargeback: {rates: {A100-80GB: \"1.60\"}, currency: USD}) and "
                    "reload the server (SIGHUP or POST /api/v1/admin/reload); see docs/chargeback.md. GPU-hours are "
                    "counted either way.");
  } else {
    bool free = false;
    for (const acc::Row& r : rep.rows) free = free || (r.amounts.cost() == 0 && r.amounts.allocated + r.amounts.idle_share > 0);
    if (free) {
      std::string set;
      for (const auto& [m, v] : L.rates_micro) set += (set.empty() ? "" : ", ") + m;
      for (const auto& [pool, v] : L.pool_rates_micro) set += (set.empty() ? "pool " : ", pool ") + pool;
      notes.push_back("Some usage costs 0: GPU models without a rate in chargeback.rates are not charged (rates set for: " +
                      set + (L.currency.empty() ? "" : ", in " + L.currency) + ").");
    }
  }
  return notes;
}

void reply_csv(httplib::Response& res, const std::string& body, const std::string& name) {
  res.status = 200;
  res.set_header("Content-Disposition", "attachment; filename=\"" + name + "\"");
  res.set_content(body, "text/csv; charset=utf-8");
}

}  // namespace

void register_report_routes(HttpServer& s, Controller& c, const Authenticator& auth) {
  s.Get("/api/v1/reports/chargeback", [&c, auth](const httplib::Request& req, httplib::Response& res) {
    auto p = auth(req, res);
    if (!p) return;
    auto vis = visibility(c, *p);
    if (!vis.ok()) return reply_error(res, vis.error());
    auto params = parse_params(req, true);
    if (!params.ok()) return reply_error(res, params.error());
    int64_t log_began = -1;
    auto l = ledger(c, params->request, &log_began);
    if (!l.ok()) return reply_error(res, l.error());
    const acc::Report rep = acc::aggregate(*l, params->by, *vis);
    if (params->format == "csv")
      return reply_csv(res, acc::chargeback_csv(*l, rep),
                       "chargeback-" + acc::format_utc(l->from).substr(0, 10) + ".csv");
    Json body = acc::chargeback_json(*l, rep);
    body["notes"] = chargeback_notes(*l, log_began, rep, *p);
    // The cluster-wide split is shown to those who see every row.
    if (*vis) body.erase("cluster");
    reply_json(res, 200, body);
  });
  s.Get("/api/v1/reports/usage", [&c, auth](const httplib::Request& req, httplib::Response& res) {
    auto p = auth(req, res);
    if (!p) return;
    if (Status st = perm::may_read(*p); !st.ok()) return reply_error(res, st.error());
    auto params = parse_params(req, false);
    if (!params.ok()) return reply_error(res, params.error());
    int64_t log_began = -1;
    auto l = ledger(c, params->request, &log_began);
    if (!l.ok()) return reply_error(res, l.error());
    if (params->format == "csv")
      return reply_csv(res, acc::usage_csv(*l), "usage-" + acc::format_utc(l->from).substr(0, 10) + ".csv");
    Json body = acc::usage_json(*l);
    bool allocated = false;
    for (const acc::ModelUsage& u : l->usage) allocated = allocated || u.allocated > 0;
    body["notes"] = empty_notes(*l, log_began, !allocated, *p);
    reply_json(res, 200, body);
  });
}

}  // namespace tessera::server
