#include "sim/report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <sstream>

namespace tessera::sim {

nlohmann::json metrics_json(const SimMetrics& m) {
  nlohmann::json pools = nlohmann::json::array();
  for (const SimMetrics::PoolCost& p : m.pools)
    pools.push_back({{"pool", p.pool}, {"kind", p.kind}, {"billed_gpu_hours", p.billed_gpu_hours},
                     {"used_gpu_hours", p.used_gpu_hours}, {"cost", p.cost}});
  nlohmann::json by_kind = nlohmann::json::object();
  for (int k = 0; k < kPoolKinds; ++k) by_kind[pool_kind_name(PoolKind(k))] = m.used_gpu_hours_by_kind[k];
  return {{"policy", m.policy},
          {"jobs", m.jobs},
          {"finished", m.finished},
          {"unfinished", m.unfinished},
          {"jct_mean_s", m.jct_mean_s},
          {"jct_p50_s", m.jct_p50_s},
          {"jct_p99_s", m.jct_p99_s},
          {"wait_mean_s", m.wait_mean_s},
          {"wait_p99_s", m.wait_p99_s},
          {"first_start_mean_s", m.first_start_mean_s},
          {"first_start_p99_s", m.first_start_p99_s},
          {"unstarted", m.unstarted},
          {"stalled_at_s", m.stalled_at},
          {"makespan_s", m.makespan_s},
          {"allocation_pct", m.allocation_pct},
          {"effective_util_pct", m.effective_util_pct},
          {"jain_fairness", m.jain_fairness},
          {"below_guarantee_s", m.below_guarantee_s},
          {"max_below_guarantee_s", m.max_below_guarantee_s},
          {"guarantee_unmet_s", m.guarantee_unmet_s},
          {"max_guarantee_unmet_s", m.max_guarantee_unmet_s},
          {"preemptions", m.preemptions},
          {"defrag_moves", m.defrag_moves},
          {"failures", m.failures},
          {"mig_reconfigurations", m.mig_reconfigurations},
          {"lost_gpu_hours", m.lost_gpu_hours},
          {"jobs_per_hour", m.jobs_per_hour},
          {"fragmentation_pct", m.fragmentation_pct},
          {"cycles", m.cycles},
          {"elapsed_s", m.elapsed_s},
          {"cost", m.cost},
          {"billed_gpu_hours", m.billed_gpu_hours},
          {"pools", pools},
          {"used_gpu_hours_by_pool_kind", by_kind},
          {"spot_reclaims", m.spot_reclaims},
          {"job_interruptions", m.job_interruptions},
          {"interruption_lost_gpu_hours", m.interruption_lost_gpu_hours},
          {"inference_spot_gpu_hours", m.inference_spot_gpu_hours},
          {"inference_spot_starts", m.inference_spot_starts},
          {"nodes_provisioned", m.nodes_provisioned},
          {"nodes_released", m.nodes_released},
          {"consolidations", m.consolidations},
          {"consolidation_moves", m.consolidation_moves},
          {"batch_finished", m.batch_finished},
          {"batch_jct_mean_s", m.batch_jct_mean_s},
          {"batch_wait_p99_s", m.batch_wait_p99_s},
          {"capacity_gpus", m.capacity_gpus}};
}

namespace {

const char* kColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b",
                         "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};

std::string esc(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '<') o += "&lt;";
    else if (c == '>') o += "&gt;";
    else if (c == '&') o += "&amp;";
    else if (c == '"') o += "&quot;";
    else o += c;
  }
  return o;
}

std::string num(double v, int prec = 1) {
  char b[64];
  std::snprintf(b, sizeof b, "%.*f", prec, v);
  return b;
}

struct Series {
  std::string name;
  std::vector<std::pair<double, double>> pts;
};

// A line chart as inline SVG: axes with min/max labels, one polyline per series, a legend.
std::string svg_chart(const std::string& title, const std::string& xlabel, const std::string& ylabel,
                      const std::vector<Series>& series, bool log_x = false) {
  const double W = 560, H = 260, L = 60, R = 10, T = 28, B = 40;
  double x0 = 1e300, x1 = -1e300, y1 = 1e-9;
  auto fx = [&](double x) { return log_x ? std::log10(std::max(x, 1.0)) : x; };
  for (const Series& s : series)
    for (auto [x, y] : s.pts) {
      x0 = std::min(x0, fx(x));
      x1 = std::max(x1, fx(x));
      y1 = std::max(y1, y);
    }
  if (x0 > x1) x0 = 0, x1 = 1;
  if (x1 == x0) x1 = x0 + 1;
  std::ostringstream o;
  o << "<svg xmlns='http://www.w3.org/2000/svg' width='" << W << "' height='" << H << "' class='chart'>";
  o << "<text x='" << W / 2 << "' y='16' text-anchor='middle' font-weight='bold'>" << esc(title) << "</text>";
  o << "<line x1='" << L << "' y1='" << H - B << "' x2='" << W - R << "' y2='" << H - B << "' stroke='#333'/>";
  o << "<line x1='" << L << "' y1='" << T << "' x2='" << L << "' y2='" << H - B << "' stroke='#333'/>";
  auto xl = [&](double v) { return log_x ? num(std::pow(10, v), 0) : num(v, 1); };
  o << "<text x='" << L << "' y='" << H - B + 14 << "' font-size='11'>" << xl(x0) << "</text>";
  o << "<text x='" << W - R << "' y='" << H - B + 14 << "' font-size='11' text-anchor='end'>" << xl(x1) << "</text>";
  o << "<text x='" << (L + W - R) / 2 << "' y='" << H - 6 << "' font-size='11' text-anchor='middle'>" << esc(xlabel)
    << "</text>";
  o << "<text x='" << L - 4 << "' y='" << H - B << "' font-size='11' text-anchor='end'>0</text>";
  o << "<text x='" << L - 4 << "' y='" << T + 8 << "' font-size='11' text-anchor='end'>" << num(y1, y1 < 10 ? 2 : 0)
    << "</text>";
  o << "<text x='12' y='" << (T + H - B) / 2 << "' font-size='11' transform='rotate(-90 12 " << (T + H - B) / 2
    << ")' text-anchor='middle'>" << esc(ylabel) << "</text>";
  for (size_t i = 0; i < series.size(); ++i) {
    const char* color = kColors[i % 10];
    o << "<polyline fill='none' stroke='" << color << "' stroke-width='1.5' points='";
    for (auto [x, y] : series[i].pts) {
      const double px = L + (fx(x) - x0) / (x1 - x0) * (W - L - R);
      const double py = H - B - y / y1 * (H - B - T);
      o << num(px, 1) << "," << num(py, 1) << " ";
    }
    o << "'/>";
    o << "<text x='" << L + 8 + double(i % 4) * 125 << "' y='" << T + 12 + double(i / 4) * 13 << "' font-size='11' fill='"
      << color << "'>" << esc(series[i].name) << "</text>";
  }
  o << "</svg>";
  return o.str();
}

}  // namespace

std::string render_html_report(const std::vector<SimReport>& reports, const std::string& title) {
  std::ostringstream o;
  o << "<!doctype html><html><head><meta charset='utf-8'><title>" << esc(title) << "</title><style>"
    << "body{font-family:sans-serif;margin:24px;color:#222}table{border-collapse:collapse;margin:12px 0}"
    << "td,th{border:1px solid #ccc;padding:4px 8px;text-align:right}th{background:#f4f4f4}"
    << "td:first-child,th:first-child{text-align:left}.chart{margin:8px;border:1px solid #eee}"
    << "</style></head><body><h1>" << esc(title) << "</h1>";
  // Comparison table.
  struct Col {
    const char* name;
    std::function<std::string(const SimMetrics&)> get;
  };
  const std::vector<Col> cols = {
      {"finished", [](const SimMetrics& m) { return std::to_string(m.finished) + "/" + std::to_string(m.jobs); }},
      {"JCT mean (h)", [](const SimMetrics& m) { return num(m.jct_mean_s / 3600, 2); }},
      {"JCT p50 (h)", [](const SimMetrics& m) { return num(m.jct_p50_s / 3600, 2); }},
      {"JCT p99 (h)", [](const SimMetrics& m) { return num(m.jct_p99_s / 3600, 2); }},
      {"wait mean (h)", [](const SimMetrics& m) { return num(m.wait_mean_s / 3600, 2); }},
      {"wait p99 (h)", [](const SimMetrics& m) { return num(m.wait_p99_s / 3600, 2); }},
      {"first start p99 (h)", [](const SimMetrics& m) { return num(m.first_start_p99_s / 3600, 2); }},
      {"makespan (h)", [](const SimMetrics& m) { return num(m.makespan_s / 3600, 1); }},
      {"jobs/h", [](const SimMetrics& m) { return num(m.jobs_per_hour, 2); }},
      {"allocation %", [](const SimMetrics& m) { return num(m.allocation_pct, 1); }},
      {"effective util %", [](const SimMetrics& m) { return num(m.effective_util_pct, 1); }},
      {"Jain", [](const SimMetrics& m) { return num(m.jain_fairness, 3); }},
      {"below guarantee (team-h)", [](const SimMetrics& m) { return num(m.below_guarantee_s / 3600, 1); }},
      {"owed, unmet: longest (h)", [](const SimMetrics& m) { return num(m.max_guarantee_unmet_s / 3600, 2); }},
      {"preemptions", [](const SimMetrics& m) { return std::to_string(m.preemptions); }},
      {"defrag moves", [](const SimMetrics& m) { return std::to_string(m.defrag_moves); }},
      {"lost GPU-h", [](const SimMetrics& m) { return num(m.lost_gpu_hours, 1); }},
      {"fragmentation %", [](const SimMetrics& m) { return num(m.fragmentation_pct, 1); }},
  };
  o << "<h2>Policies compared</h2><table><tr><th>policy</th>";
  for (const Col& c : cols) o << "<th>" << c.name << "</th>";
  o << "</tr>";
  for (const SimReport& r : reports) {
    o << "<tr><td>" << esc(r.metrics.policy) << "</td>";
    for (const Col& c : cols) o << "<td>" << c.get(r.metrics) << "</td>";
    o << "</tr>";
  }
  o << "</table>";
  std::vector<Series> alloc, eff, queue, cdf;
  for (const SimReport& r : reports) {
    Series a{r.metrics.policy, {}}, e{r.metrics.policy, {}}, q{r.metrics.policy, {}}, c{r.metrics.policy, {}};
    const double t0 = r.timeline.empty() ? 0 : double(r.timeline.front().t);
    for (const SimSample& s : r.timeline) {
      const double h = (double(s.t) - t0) / 3600;
      a.pts.push_back({h, s.allocation_pct});
      e.pts.push_back({h, s.effective_pct});
      q.pts.push_back({h, double(s.pending)});
    }
    const size_t n = r.jct_s.size();
    const size_t step = std::max<size_t>(1, n / 300);
    for (size_t i = 0; i < n; i += step) c.pts.push_back({r.jct_s[i] / 3600, double(i + 1) / double(n)});
    if (n) c.pts.push_back({r.jct_s.back() / 3600, 1.0});
    alloc.push_back(std::move(a));
    eff.push_back(std::move(e));
    queue.push_back(std::move(q));
    cdf.push_back(std::move(c));
  }
  o << "<h2>Over time</h2>";
  o << svg_chart("Allocated GPUs (% of capacity)", "hours", "%", alloc);
  o << svg_chart("Effective utilisation (% of capacity)", "hours", "%", eff);
  o << svg_chart("Pending jobs", "hours", "jobs", queue);
  o << svg_chart("JCT CDF", "JCT (hours, log scale)", "fraction", cdf, true);
  o << "<h2>GPUs held per team</h2>";
  for (const SimReport& r : reports) {
    std::vector<Series> teams;
    for (size_t k = 0; k < r.teams.size(); ++k) {
      Series s{r.teams[k], {}};
      const double t0 = r.timeline.empty() ? 0 : double(r.timeline.front().t);
      for (const SimSample& x : r.timeline)
        s.pts.push_back({(double(x.t) - t0) / 3600, k < x.team_gpus.size() ? x.team_gpus[k] : 0});
      teams.push_back(std::move(s));
    }
    o << svg_chart(r.metrics.policy + ": GPUs per team", "hours", "GPUs", teams);
  }
  o << "<p>Metric definitions: docs/simulator.md.</p></body></html>\n";
  return o.str();
}

}  // namespace tessera::sim
