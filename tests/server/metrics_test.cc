// Prometheus metrics: the exposition format against its rules (names, escaping, HELP/TYPE once per
// family, cumulative histograms, stable order), route patterns, pending-reason categories, the
// utilisation samples of an in-process controller, and /metrics and /api/v1/utilisation of the real
// server binary parsed line by line.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include "server/controller.h"
#include "server/metrics.h"
#include "server/server_main.h"
#include "server_process.h"

namespace tessera::server {
namespace {

using metrics::Family;
using metrics::Registry;
using metrics::Type;

// ---- a strict reader of the text format --------------------------------------------------------

struct Sample {
  std::string name;
  std::vector<std::pair<std::string, std::string>> labels;  // as written (unescaped values)
  std::string value;
};

std::string unescape(const std::string& v) {
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) {
    if (v[i] == '\\' && i + 1 < v.size()) {
      ++i;
      out += v[i] == 'n' ? '\n' : v[i];
    } else {
      out += v[i];
    }
  }
  return out;
}

// Checks `text` against the 0.0.4 rules; returns the problems (empty = valid) and fills `samples`.
std::vector<std::string> check_exposition(const std::string& text, std::vector<Sample>* samples = nullptr) {
  static const std::regex help_re(R"(^# HELP ([a-zA-Z_:][a-zA-Z0-9_:]*) (.*)$)");
  static const std::regex type_re(R"(^# TYPE ([a-zA-Z_:][a-zA-Z0-9_:]*) (counter|gauge|histogram|summary|untyped)$)");
  static const std::string label_value = R"("(?:[^"\\\n]|\\[\\"n])*")";
  static const std::string label = "[a-zA-Z_][a-zA-Z0-9_]*=" + label_value;
  static const std::regex sample_re("^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\\{(" + label + "(?:," + label +
                                    ")*)?\\})? (NaN|[+-]Inf|-?[0-9]+(?:\\.[0-9]+)?(?:[eE][+-]?[0-9]+)?)$");
  static const std::regex one_label("([a-zA-Z_][a-zA-Z0-9_]*)=(" + label_value + ")");
  std::vector<std::string> problems;
  if (!text.empty() && text.back() != '\n') problems.push_back("the text does not end with a newline");
  std::map<std::string, std::string> types;
  std::set<std::string> helps, finished;
  std::string current, last_family;
  // Histogram checks: per series (labels without le), the bucket values in order.
  std::map<std::string, std::vector<std::pair<std::string, double>>> buckets;
  std::map<std::string, double> counts;
  std::istringstream in(text);
  int n = 0;
  for (std::string line; std::getline(in, line);) {
    ++n;
    const std::string at = "line " + std::to_string(n) + " \"" + line + "\": ";
    std::smatch m;
    if (line.rfind("# HELP ", 0) == 0) {
      if (!std::regex_match(line, m, help_re)) problems.push_back(at + "bad HELP line");
      else if (!helps.insert(m[1]).second) problems.push_back(at + "second HELP for " + m[1].str());
      continue;
    }
    if (line.rfind("# TYPE ", 0) == 0) {
      if (!std::regex_match(line, m, type_re)) {
        problems.push_back(at + "bad TYPE line");
        continue;
      }
      const std::string fam = m[1];
      if (types.count(fam)) problems.push_back(at + "second TYPE for " + fam);
      if (!last_family.empty() && fam < last_family) problems.push_back(at + "families not sorted by name");
      if (current != fam && !current.empty()) finished.insert(current);
      types[fam] = m[2];
      current = last_family = fam;
      continue;
    }
    if (line.empty() || line[0] == '#') {
      problems.push_back(at + "unexpected line");
      continue;
    }
    if (!std::regex_match(line, m, sample_re)) {
      problems.push_back(at + "not a sample line");
      continue;
    }
    Sample s{m[1], {}, m[3]};
    const std::string label_text = m[2];
    for (std::sregex_iterator it(label_text.begin(), label_text.end(), one_label), end; it != end; ++it) {
      const std::string v = (*it)[2];
      s.labels.push_back({(*it)[1], unescape(v.substr(1, v.size() - 2))});
    }
    std::string fam = s.name;
    if (!types.count(fam))
      for (const char* suffix : {"_bucket", "_sum", "_count"})
        if (fam.size() > strlen(suffix) && fam.ends_with(suffix) &&
            types.count(fam.substr(0, fam.size() - strlen(suffix))) &&
            types[fam.substr(0, fam.size() - strlen(suffix))] == "histogram")
          fam = fam.substr(0, fam.size() - strlen(suffix));
    if (!types.count(fam)) problems.push_back(at + "sample before its TYPE line");
    else if (fam != current) problems.push_back(at + "sample outside its family's block");
    if (finished.count(fam)) problems.push_back(at + "family " + fam + " continues after another began");
    std::set<std::string> names;
    for (const auto& [k, v] : s.labels)
      if (!names.insert(k).second) problems.push_back(at + "label " + k + " twice");
    if (types.count(fam) && types[fam] == "histogram") {
      std::string key;
      std::string le;
      for (const auto& [k, v] : s.labels)
        if (k == "le") le = v;
        else key += k + "=" + v + ",";
      if (s.name == fam + "_bucket") {
        if (le.empty()) problems.push_back(at + "bucket without le");
        buckets[fam + "{" + key].push_back({le, std::stod(s.value == "+Inf" ? "inf" : s.value)});
      } else if (s.name == fam + "_count") {
        counts[fam + "{" + key] = std::stod(s.value);
      }
    }
    if (samples) samples->push_back(std::move(s));
  }
  for (const auto& [series, bs] : buckets) {
    for (size_t i = 1; i < bs.size(); ++i)
      if (bs[i].second < bs[i - 1].second) problems.push_back(series + ": buckets not cumulative");
    if (bs.empty() || bs.back().first != "+Inf") problems.push_back(series + ": last bucket is not le=\"+Inf\"");
    else if (!counts.count(series) || counts[series] != bs.back().second)
      problems.push_back(series + ": _count differs from the +Inf bucket");
  }
  return problems;
}

// The value of the one sample with this name and exactly these labels (any order), or NaN.
double value_of(const std::vector<Sample>& samples, const std::string& name,
                std::vector<std::pair<std::string, std::string>> labels) {
  std::sort(labels.begin(), labels.end());
  for (const Sample& s : samples) {
    if (s.name != name) continue;
    auto l = s.labels;
    std::sort(l.begin(), l.end());
    if (l == labels) return s.value == "NaN" ? std::nan("") : std::stod(s.value == "+Inf" ? "inf" : s.value);
  }
  return std::nan("");
}

// ---- the library -------------------------------------------------------------------------------

TEST(MetricsFormat, NamesAreValidated) {
  EXPECT_TRUE(metrics::valid_metric_name("tessera_jobs"));
  EXPECT_TRUE(metrics::valid_metric_name("a:b_c9"));
  EXPECT_TRUE(metrics::valid_metric_name("_x"));
  EXPECT_FALSE(metrics::valid_metric_name(""));
  EXPECT_FALSE(metrics::valid_metric_name("9lives"));
  EXPECT_FALSE(metrics::valid_metric_name("has-dash"));
  EXPECT_FALSE(metrics::valid_metric_name("sp ace"));
  EXPECT_TRUE(metrics::valid_label_name("queue"));
  EXPECT_FALSE(metrics::valid_label_name("a:b"));  // colons only in metric names
  EXPECT_FALSE(metrics::valid_label_name("__reserved"));
  EXPECT_FALSE(metrics::valid_label_name("0x"));

  Registry r;
  auto bad = r.counter("bad-name_total", "x");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().message.rfind("name:", 0), 0u) << bad.error().message;
  auto bad_label = r.gauge("g", "x", {"ok", "not-ok"});
  ASSERT_FALSE(bad_label.ok());
  EXPECT_EQ(bad_label.error().message.rfind("label_names:", 0), 0u);
  EXPECT_FALSE(r.gauge("g", "x", {"a", "a"}).ok());
  auto le = r.histogram("h", "x", {"le"}, {1});
  ASSERT_FALSE(le.ok());
  EXPECT_NE(le.error().message.find("reserved"), std::string::npos);
  EXPECT_FALSE(r.histogram("h", "x", {}, {}).ok());
  EXPECT_FALSE(r.histogram("h", "x", {}, {2, 1}).ok());
  EXPECT_FALSE(r.histogram("h", "x", {}, {1, std::numeric_limits<double>::infinity()}).ok());
  ASSERT_TRUE(r.gauge("g", "x").ok());
  auto dup = r.counter("g", "again");
  ASSERT_FALSE(dup.ok());
  EXPECT_NE(dup.error().message.find("already registered"), std::string::npos);
}

TEST(MetricsFormat, LabelValuesAndHelpAreEscaped) {
  EXPECT_EQ(metrics::escape_label_value(R"(a\b"c)" "\n" "d"), R"(a\\b\"c\nd)");
  EXPECT_EQ(metrics::escape_help("line\\one\nline \"two\""), "line\\\\one\\nline \"two\"");
  Registry r;
  auto g = r.gauge("tricky", "Help with a \\ and a\nnewline.", {"v"});
  ASSERT_TRUE(g.ok());
  (*g)->set({"quote\" back\\ nl\n end"}, 1);
  const std::string text = r.text();
  EXPECT_EQ(text,
            "# HELP tricky Help with a \\\\ and a\\nnewline.\n"
            "# TYPE tricky gauge\n"
            "tricky{v=\"quote\\\" back\\\\ nl\\n end\"} 1\n");
  std::vector<Sample> samples;
  EXPECT_TRUE(check_exposition(text, &samples).empty());
  ASSERT_EQ(samples.size(), 1u);
  EXPECT_EQ(samples[0].labels[0].second, "quote\" back\\ nl\n end");  // reads back to the original
}

TEST(MetricsFormat, ValuesAreWrittenExactly) {
  EXPECT_EQ(metrics::format_value(0), "0");
  EXPECT_EQ(metrics::format_value(24), "24");
  EXPECT_EQ(metrics::format_value(-3), "-3");
  EXPECT_EQ(metrics::format_value(2.5), "2.5");
  EXPECT_EQ(metrics::format_value(0.001), "0.001");
  EXPECT_EQ(metrics::format_value(1e15), "1000000000000000");
  EXPECT_EQ(metrics::format_value(std::nan("")), "NaN");
  EXPECT_EQ(metrics::format_value(std::numeric_limits<double>::infinity()), "+Inf");
  EXPECT_EQ(metrics::format_value(-std::numeric_limits<double>::infinity()), "-Inf");
  EXPECT_EQ(std::stod(metrics::format_value(0.1 + 0.2)), 0.1 + 0.2);  // round-trips
}

TEST(MetricsFormat, FamiliesSortedHelpAndTypeOnceLabelsInDeclaredOrder) {
  Registry r;
  auto z = r.counter("zeta_total", "Z.", {"queue", "state"});
  auto a = r.gauge("alpha", "A.");
  ASSERT_TRUE(z.ok() && a.ok());
  (*z)->inc({"team-b", "running"});
  (*z)->inc({"team-a", "running"}, 2);
  (*z)->inc({"team-a", "pending"});
  (*z)->inc({"team-a", "pending"}, -5);  // counters only go up: ignored
  (*a)->set({}, 7);
  const std::string text = r.text();
  EXPECT_EQ(text,
            "# HELP alpha A.\n# TYPE alpha gauge\nalpha 7\n"
            "# HELP zeta_total Z.\n# TYPE zeta_total counter\n"
            "zeta_total{queue=\"team-a\",state=\"pending\"} 1\n"
            "zeta_total{queue=\"team-a\",state=\"running\"} 2\n"
            "zeta_total{queue=\"team-b\",state=\"running\"} 1\n");
  EXPECT_TRUE(check_exposition(text).empty());
  // The same state renders the same text, whatever order families are collected in.
  auto fams = r.collect();
  std::reverse(fams.begin(), fams.end());
  EXPECT_EQ(metrics::render(fams), text);
  // A plain counter reads 0 before its first event.
  Registry r2;
  ASSERT_TRUE(r2.counter("events_total", "E.").ok());
  EXPECT_EQ(r2.text(), "# HELP events_total E.\n# TYPE events_total counter\nevents_total 0\n");
}

TEST(MetricsFormat, HistogramBucketsAreCumulativeAndEndInInf) {
  Registry r;
  auto h = r.histogram("latency_seconds", "L.", {"route"}, {0.1, 1, 10});
  ASSERT_TRUE(h.ok());
  for (double v : {0.05, 0.1, 0.5, 2.0, 20.0}) (*h)->observe({"/a"}, v);  // 0.1 falls in le="0.1"
  (*h)->observe({"/b"}, 3);
  const std::string text = r.text();
  EXPECT_EQ(text,
            "# HELP latency_seconds L.\n# TYPE latency_seconds histogram\n"
            "latency_seconds_bucket{route=\"/a\",le=\"0.1\"} 2\n"
            "latency_seconds_bucket{route=\"/a\",le=\"1\"} 3\n"
            "latency_seconds_bucket{route=\"/a\",le=\"10\"} 4\n"
            "latency_seconds_bucket{route=\"/a\",le=\"+Inf\"} 5\n"
            "latency_seconds_sum{route=\"/a\"} 22.65\n"
            "latency_seconds_count{route=\"/a\"} 5\n"
            "latency_seconds_bucket{route=\"/b\",le=\"0.1\"} 0\n"
            "latency_seconds_bucket{route=\"/b\",le=\"1\"} 0\n"
            "latency_seconds_bucket{route=\"/b\",le=\"10\"} 1\n"
            "latency_seconds_bucket{route=\"/b\",le=\"+Inf\"} 1\n"
            "latency_seconds_sum{route=\"/b\"} 3\n"
            "latency_seconds_count{route=\"/b\"} 1\n");
  EXPECT_TRUE(check_exposition(text).empty()) << text;
  // The checker itself catches broken histograms and formats.
  EXPECT_FALSE(check_exposition("# TYPE h histogram\nh_bucket{le=\"1\"} 2\nh_bucket{le=\"+Inf\"} 1\nh_count 1\n").empty());
  EXPECT_FALSE(check_exposition("# TYPE h histogram\nh_bucket{le=\"1\"} 1\nh_count 1\n").empty());
  EXPECT_FALSE(check_exposition("# TYPE g gauge\ng{a=\"x\"\"} 1\n").empty());
  EXPECT_FALSE(check_exposition("g 1\n").empty());
  EXPECT_FALSE(check_exposition("# TYPE b gauge\nb 1\n# TYPE a gauge\na 1\n").empty());
}

TEST(MetricsFormat, ConcurrentUpdatesAreAllCounted) {
  Registry r;
  auto c = r.counter("hits_total", "H.", {"route"});
  auto h = r.histogram("d_seconds", "D.", {}, metrics::latency_buckets());
  ASSERT_TRUE(c.ok() && h.ok());
  std::vector<std::thread> ts;
  for (int t = 0; t < 8; ++t)
    ts.emplace_back([&, t] {
      for (int i = 0; i < 5000; ++i) {
        (*c)->inc({t % 2 ? "/odd" : "/even"});
        (*h)->observe({}, 0.001 * (i % 7));
        if (i % 1000 == 0) (void)r.text();
      }
    });
  for (auto& t : ts) t.join();
  EXPECT_EQ((*c)->value({"/odd"}) + (*c)->value({"/even"}), 40000);
  EXPECT_EQ((*h)->data().count, 40000u);
  EXPECT_TRUE(check_exposition(r.text()).empty());
}

TEST(MetricsRoutes, RoutePatternsAreBounded) {
  EXPECT_EQ(route_pattern("/api/v1/jobs"), "/api/v1/jobs");
  EXPECT_EQ(route_pattern("/api/v1/jobs/17"), "/api/v1/jobs/{id}");
  EXPECT_EQ(route_pattern("/api/v1/jobs/anything"), "/api/v1/jobs/{id}");
  EXPECT_EQ(route_pattern("/api/v1/jobs/17/logs"), "/api/v1/jobs/{id}/logs");
  EXPECT_EQ(route_pattern("/api/v1/jobs/17/cancel"), "/api/v1/jobs/{id}/cancel");
  EXPECT_EQ(route_pattern("/api/v1/jobs/17/priority"), "/api/v1/jobs/{id}/priority");
  EXPECT_EQ(route_pattern("/api/v1/jobs/17/bogus"), "other");
  EXPECT_EQ(route_pattern("/api/v1/nodes/a100-0/drain"), "/api/v1/nodes/{node}/drain");
  EXPECT_EQ(route_pattern("/api/v1/agent/heartbeat"), "/api/v1/agent/heartbeat");
  EXPECT_EQ(route_pattern("/api/v1/utilisation"), "/api/v1/utilisation");
  EXPECT_EQ(route_pattern("/api/v1/reports/chargeback"), "/api/v1/reports/chargeback");
  EXPECT_EQ(route_pattern("/metrics"), "/metrics");
  EXPECT_EQ(route_pattern("/healthz"), "/healthz");
  EXPECT_EQ(route_pattern("/"), "/");
  EXPECT_EQ(route_pattern("/api/v1/nope"), "other");
  EXPECT_EQ(route_pattern("/random/path/12345"), "other");
  EXPECT_EQ(route_pattern("/api/v2/jobs"), "other");
}

TEST(MetricsRoutes, PendingWaitCategoriesFallIntoFewLabels) {
  EXPECT_STREQ(pending_metric_category(WaitCategory::kQuota), "quota");
  EXPECT_STREQ(pending_metric_category(WaitCategory::kOrder), "priority");
  EXPECT_STREQ(pending_metric_category(WaitCategory::kReservation), "priority");
  EXPECT_STREQ(pending_metric_category(WaitCategory::kPreempting), "preempting");
  EXPECT_STREQ(pending_metric_category(WaitCategory::kMigReconfiguring), "mig_reconfiguring");
  EXPECT_STREQ(pending_metric_category(WaitCategory::kTopology), "topology");
  EXPECT_STREQ(pending_metric_category(WaitCategory::kCapacity), "capacity");
  EXPECT_STREQ(pending_metric_category(WaitCategory::kInvalid), "other");
  EXPECT_STREQ(pending_metric_category(WaitCategory::kOther), "other");
}

// ---- the controller in-process -------------------------------------------------------------------

TEST(ControllerMetrics, GaugesCountersAndUtilisationSamples) {
  const std::string dir = testing::make_temp_dir("tessera-metrics");
  std::atomic<int64_t> now{1'000'000};  // a multiple of 10
  ControllerOptions opt;
  opt.clock = [&now] { return now.load(); };
  opt.cycle_interval_ms = 20;
  const Principal admin{"admin", Role::kAdmin, "", ""};
  {
    auto store = open_sqlite_store(dir);
    ASSERT_TRUE(store.ok()) << store.error().message;
    auto cfg = load_server_config("");
    ASSERT_TRUE(cfg.ok());
    auto c = Controller::start(*cfg, store->get(), opt);
    ASSERT_TRUE(c.ok()) << c.error().message;
    auto spec = config::parse_job_spec_json(R"({"name": "u", "queue": "team-a", "resources": {"gpus": 8}, "command": ["x"]})");
    ASSERT_TRUE(spec.ok());
    ASSERT_TRUE((*c)->submit(admin, *spec, "", nullptr).ok());
    (*c)->wait_for_cycle();
    (*c)->wait_for_cycle();

    // Gauges and counters, rendered and read back.
    std::vector<Sample> samples;
    const std::string text = metrics::render((*c)->metric_families());
    const auto problems = check_exposition(text, &samples);
    EXPECT_TRUE(problems.empty()) << problems.front() << "\n" << text;
    EXPECT_EQ(value_of(samples, "tessera_jobs", {{"state", "running"}, {"queue", "team-a"}}), 1);
    EXPECT_EQ(value_of(samples, "tessera_jobs", {{"state", "pending"}, {"queue", "team-b"}}), 0);
    EXPECT_EQ(value_of(samples, "tessera_gpus", {{"model", "A100-80GB"}, {"pool", "default"}, {"state", "allocated"}}), 8);
    EXPECT_EQ(value_of(samples, "tessera_gpus", {{"model", "A100-80GB"}, {"pool", "default"}, {"state", "idle"}}), 24);
    EXPECT_EQ(value_of(samples, "tessera_queue_gpu_milli", {{"queue", "team-a"}, {"class", "A100-80GB"}, {"kind", "used"}}), 8000);
    EXPECT_EQ(value_of(samples, "tessera_queue_gpu_milli",
                       {{"queue", "team-a"}, {"class", "A100-80GB"}, {"kind", "guaranteed"}}), 12000);
    EXPECT_EQ(value_of(samples, "tessera_queue_gpu_milli",
                       {{"queue", "team-a"}, {"class", "A100-80GB"}, {"kind", "borrowed"}}), 0);
    EXPECT_EQ(value_of(samples, "tessera_jobs_submitted_total", {{"queue", "team-a"}}), 1);
    EXPECT_EQ(value_of(samples, "tessera_scheduling_decisions_total", {{"kind", "start"}}), 1);
    EXPECT_GE(value_of(samples, "tessera_scheduling_cycle_seconds_count", {}), 2);
    EXPECT_EQ(value_of(samples, "tessera_node_ready", {{"node", "node-0"}}), 1);
    EXPECT_TRUE(std::isnan(value_of(samples, "tessera_agent_heartbeat_age_seconds", {{"node", "node-0"}})));  // absent

    // A sample with the job running and no utilisation report: used is unknown.
    now += 10;
    (*c)->wait_for_cycle();
    // An agent's utilisation report (admin may speak for a node when agents are not required).
    auto shown = (*c)->show_job(admin, 1);
    ASSERT_TRUE(shown.ok());
    const std::string node = (*shown)["placement"][0]["node"];
    nlohmann::json gpus = nlohmann::json::array();
    for (int i = 0; i < 8; ++i) gpus.push_back({{"index", i}, {"utilization_pct", 50}});
    ASSERT_TRUE((*c)->agent_heartbeat(admin, {{"node", node}, {"tasks", nlohmann::json::array()}, {"gpus", gpus}}).ok());
    now += 15;  // 1'000'025: the next sample is at 1'000'020
    (*c)->wait_for_cycle();

    auto u = (*c)->utilisation(admin, 60);
    ASSERT_TRUE(u.ok()) << u.error().message;
    EXPECT_EQ((*u)["step_s"], 10);
    ASSERT_EQ((*u)["series"].size(), 1u);
    const auto& s = (*u)["series"][0];
    EXPECT_EQ(s["model"], "A100-80GB");
    EXPECT_EQ(s["pool"], "default");
    EXPECT_EQ(s["total_milli"], 32000);
    ASSERT_EQ(s["points"].size(), 3u) << s.dump();
    EXPECT_EQ(s["points"][0][0], 1'000'000);
    EXPECT_EQ(s["points"][1][0], 1'000'010);
    EXPECT_EQ(s["points"][1][1], 8000);
    EXPECT_TRUE(s["points"][1][2].is_null());  // no utilisation report yet: unknown
    EXPECT_EQ(s["points"][2][0], 1'000'020);
    EXPECT_EQ(s["points"][2][1], 8000);
    EXPECT_EQ(s["points"][2][2], 4000);  // 8 GPUs at 50 %
    // Only the last N minutes.
    now += 3600;
    (*c)->wait_for_cycle();
    auto recent = (*c)->utilisation(admin, 1);
    ASSERT_TRUE(recent.ok());
    EXPECT_EQ((*recent)["series"][0]["points"].size(), 1u);
    // Bad minutes name the field; agents may not read.
    auto bad = (*c)->utilisation(admin, 0);
    ASSERT_FALSE(bad.ok());
    EXPECT_EQ(bad.error().message.rfind("minutes:", 0), 0u);
    EXPECT_FALSE((*c)->utilisation(admin, 1441).ok());
    EXPECT_EQ((*c)->utilisation(Principal{"n", Role::kAgent, "", ""}, 60).error().code, ErrorCode::kPermissionDenied);

    // Cancelling counts a finished job.
    ASSERT_TRUE((*c)->cancel_job(admin, 1).ok());
    samples.clear();
    (void)check_exposition(metrics::render((*c)->metric_families()), &samples);
    EXPECT_EQ(value_of(samples, "tessera_jobs_finished_total", {{"state", "cancelled"}, {"queue", "team-a"}}), 1);
    EXPECT_EQ(value_of(samples, "tessera_jobs", {{"state", "running"}, {"queue", "team-a"}}), 0);
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace tessera::server

// ---- the real server ----------------------------------------------------------------------------

namespace tessera::testing {
namespace {

using server::Sample;

class MetricsE2E : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string out;
    ASSERT_TRUE(server.start(&out)) << out;
  }
  // The whole /metrics text, checked line by line.
  std::vector<Sample> scrape() {
    auto r = server.get("/metrics", "");
    EXPECT_EQ(r.status, 200);
    std::vector<Sample> samples;
    const auto problems = server::check_exposition(r.raw, &samples);
    EXPECT_TRUE(problems.empty()) << problems.size() << " problems, first: " << problems.front();
    return samples;
  }
  double value(const std::string& name, std::vector<std::pair<std::string, std::string>> labels) {
    return server::value_of(scrape(), name, std::move(labels));
  }
  ServerProcess server;
};

TEST_F(MetricsE2E, ScrapeIsValidAndFollowsTheCluster) {
  // No token needed; the content type is the text format's.
  httplib::Client cli("127.0.0.1", server.port());
  auto raw = cli.Get("/metrics");
  ASSERT_TRUE(raw);
  EXPECT_EQ(raw->status, 200);
  EXPECT_EQ(raw->get_header_value("Content-Type"), "text/plain; version=0.0.4; charset=utf-8");

  std::vector<Sample> before = scrape();
  EXPECT_EQ(server::value_of(before, "tessera_build_info", {{"version", "0.1.0"}}), 1);
  EXPECT_EQ(server::value_of(before, "tessera_gpus", {{"model", "A100-80GB"}, {"pool", "default"}, {"state", "idle"}}), 24);
  EXPECT_EQ(server::value_of(before, "tessera_jobs", {{"state", "running"}, {"queue", "team-a"}}), 0);
  EXPECT_EQ(server::value_of(before, "tessera_node_ready", {{"node", "a100-0"}}), 1);
  const double posted = server::value_of(
      before, "tessera_api_requests_total", {{"route", "/api/v1/jobs"}, {"method", "POST"}, {"code", "201"}});
  EXPECT_TRUE(std::isnan(posted));  // nothing posted yet

  auto r = server.post("/api/v1/jobs", server.admin_token(), job("alpha", "team-a"));
  ASSERT_EQ(r.status, 201) << r.raw;
  const int64_t id = r.body["id"];
  ASSERT_TRUE(eventually([&] {
    return server.get("/api/v1/jobs/" + std::to_string(id), server.admin_token()).body["state"] == "running";
  }));
  ASSERT_TRUE(eventually([&] { return value("tessera_jobs", {{"state", "running"}, {"queue", "team-a"}}) == 1; }));
  std::vector<Sample> after = scrape();
  EXPECT_EQ(server::value_of(after, "tessera_api_requests_total",
                             {{"route", "/api/v1/jobs"}, {"method", "POST"}, {"code", "201"}}), 1);
  EXPECT_GE(server::value_of(after, "tessera_api_requests_total",
                             {{"route", "/api/v1/jobs/{id}"}, {"method", "GET"}, {"code", "200"}}), 1);
  EXPECT_GE(server::value_of(after, "tessera_api_request_duration_seconds_count", {{"route", "/api/v1/jobs/{id}"}}), 1);
  // Counted once the answer is sent (the client may read it a moment before).
  EXPECT_TRUE(eventually([&] { return value("tessera_api_request_sent_seconds_count", {{"route", "/api/v1/jobs"}}) >= 1; }));
  for (const Sample& s : after)
    for (const auto& [k, v] : s.labels)
      EXPECT_TRUE(k != "route" || v.find("/jobs/" + std::to_string(id)) == std::string::npos) << "raw path in " << v;
  EXPECT_EQ(server::value_of(after, "tessera_gpus", {{"model", "A100-80GB"}, {"pool", "default"}, {"state", "allocated"}}), 1);
  EXPECT_EQ(server::value_of(after, "tessera_gpus", {{"model", "A100-80GB"}, {"pool", "default"}, {"state", "idle"}}), 23);
  EXPECT_EQ(server::value_of(after, "tessera_queue_gpu_milli", {{"queue", "team-a"}, {"class", "A100-80GB"}, {"kind", "used"}}),
            1000);
  EXPECT_EQ(server::value_of(after, "tessera_queue_gpu_milli", {{"queue", "org"}, {"class", "A100-80GB"}, {"kind", "used"}}),
            1000);
  EXPECT_EQ(server::value_of(after, "tessera_queue_gpu_milli",
                             {{"queue", "team-a"}, {"class", "A100-80GB"}, {"kind", "guaranteed"}}), 8000);
  EXPECT_GE(server::value_of(after, "tessera_scheduling_decisions_total", {{"kind", "start"}}), 1);
  EXPECT_GE(server::value_of(after, "tessera_scheduling_cycle_seconds_count", {}), 1);

  // A job that cannot start now is pending with a bounded reason category.
  auto big = server.post("/api/v1/jobs", server.admin_token(), job("big", "team-b", Json{{"gpus", 8}}));
  ASSERT_EQ(big.status, 201) << big.raw;
  auto huge = server.post("/api/v1/jobs", server.admin_token(),
                          Json{{"name", "wide"}, {"queue", "team-b"}, {"tasks", 2}, {"resources", {{"gpus", 8}}},
                               {"command", {"sleep", "1"}}});
  ASSERT_EQ(huge.status, 201) << huge.raw;
  ASSERT_TRUE(eventually([&] {
    double pending = 0;
    for (const Sample& s : scrape())
      if (s.name == "tessera_jobs_pending") pending += std::stod(s.value);
    return pending >= 1;
  }));
  std::set<std::string> categories;
  for (const Sample& s : scrape())
    if (s.name == "tessera_jobs_pending")
      for (const auto& [k, v] : s.labels)
        if (k == "reason") categories.insert(v);
  const std::set<std::string> known = {"array_limit", "backoff", "begin_time", "capacity", "dependency", "held", "mig_reconfiguring", "new", "other",
                                       "preempting", "priority", "quota", "topology"};
  EXPECT_EQ(categories, known);
}

TEST_F(MetricsE2E, UtilisationShapeAndErrors) {
  auto r = server.post("/api/v1/jobs", server.admin_token(), job("alpha", "team-a", Json{{"gpus", 2}}));
  ASSERT_EQ(r.status, 201);
  const std::string viewer = server.token("v", "viewer");
  const std::string agent = server.token("a", "agent");
  // Samples come every 10 s of the real clock: wait for one taken with the job running.
  HttpReply u;
  bool sampled = false;
  for (auto until = std::chrono::steady_clock::now() + std::chrono::seconds(25);
       !sampled && std::chrono::steady_clock::now() < until; std::this_thread::sleep_for(std::chrono::milliseconds(200))) {
    u = server.get("/api/v1/utilisation?minutes=5", viewer);
    if (u.status != 200 || u.body["series"].empty()) continue;
    const Json& pts = u.body["series"][0]["points"];
    sampled = !pts.empty() && pts.back()[1] == 2000;
  }
  ASSERT_TRUE(sampled) << u.raw;
  EXPECT_EQ(u.body["step_s"], 10);
  ASSERT_EQ(u.body["series"].size(), 1u);
  const Json& s = u.body["series"][0];
  EXPECT_EQ(s["model"], "A100-80GB");
  EXPECT_EQ(s["pool"], "default");
  EXPECT_EQ(s["total_milli"], 24000);
  for (const Json& p : s["points"]) {
    ASSERT_TRUE(p.is_array() && p.size() == 3) << p.dump();
    EXPECT_TRUE(p[0].is_number_integer());
    EXPECT_EQ(p[0].get<int64_t>() % 10, 0);
    EXPECT_TRUE(p[1].is_number_integer());
    EXPECT_TRUE(p[2].is_null() || p[2].is_number_integer());
  }
  EXPECT_EQ(server.get("/api/v1/utilisation", viewer).status, 200);  // default 60 minutes
  for (const char* bad : {"0", "1441", "abc", "", "-5", "10x"}) {
    auto e = server.get(std::string("/api/v1/utilisation?minutes=") + bad, viewer);
    EXPECT_EQ(e.status, 400) << bad << ": " << e.raw;
    EXPECT_EQ(e.body["error"]["field"], "minutes") << e.raw;
  }
  EXPECT_EQ(server.get("/api/v1/utilisation", "").status, 401);
  EXPECT_EQ(server.get("/api/v1/utilisation", agent).status, 403);
}

TEST_F(MetricsE2E, DrainPreemptsAndReservesTheNode) {
  auto r = server.post("/api/v1/jobs", server.admin_token(), job("alpha", "team-a", Json{{"gpus", 2}}));
  ASSERT_EQ(r.status, 201);
  const std::string path = "/api/v1/jobs/" + std::to_string(r.body["id"].get<int64_t>());
  ASSERT_TRUE(eventually([&] { return server.get(path, server.admin_token()).body["state"] == "running"; }));
  const std::string node = server.get(path, server.admin_token()).body["placement"][0]["node"];
  auto d = server.post("/api/v1/nodes/" + node + "/drain", server.admin_token(), Json{{"reason", "new DIMM"}});
  ASSERT_EQ(d.status, 200) << d.raw;
  // The job does not checkpoint: it is stopped and requeued at once (then starts elsewhere).
  ASSERT_TRUE(eventually([&] { return value("tessera_preemptions_total", {}) == 1; }));
  std::vector<Sample> s = scrape();
  EXPECT_GE(server::value_of(s, "tessera_preempted_gpu_hours_total", {}), 0);
  EXPECT_EQ(server::value_of(s, "tessera_node_schedulable", {{"node", node}}), 0);
  EXPECT_EQ(server::value_of(s, "tessera_node_ready", {{"node", node}}), 1);
  EXPECT_EQ(server::value_of(s, "tessera_gpus", {{"model", "A100-80GB"}, {"pool", "default"}, {"state", "reserved"}}), 8);
  EXPECT_EQ(server::value_of(s, "tessera_api_requests_total",
                             {{"route", "/api/v1/nodes/{node}/drain"}, {"method", "POST"}, {"code", "200"}}), 1);
}

TEST(MetricsAgents, HeartbeatAgeIsAbsentUntilRegisteredAndLossesCount) {
  ServerProcess server;
  server.with_agents({"--heartbeat-interval-ms", "200", "--missed-heartbeats", "50"});
  std::string out;
  ASSERT_TRUE(server.start(&out)) << out;
  const std::string t = server.admin_token();
  auto scrape = [&] {
    auto r = server.get("/metrics", "");
    std::vector<Sample> samples;
    const auto problems = server::check_exposition(r.raw, &samples);
    EXPECT_TRUE(problems.empty()) << problems.front();
    return samples;
  };
  std::vector<Sample> s = scrape();
  EXPECT_TRUE(std::isnan(server::value_of(s, "tessera_agent_heartbeat_age_seconds", {{"node", "a100-0"}})));  // absent
  EXPECT_EQ(server::value_of(s, "tessera_node_ready", {{"node", "a100-0"}}), 0);
  EXPECT_EQ(server::value_of(s, "tessera_gpus", {{"model", "A100-80GB"}, {"pool", "default"}, {"state", "down"}}), 24);

  Json reg{{"node", "a100-0"}, {"address", "127.0.0.1"}, {"log_port", 0}, {"inventory", {{"source", "fake"}, {"gpus", Json::array()}}}};
  for (int i = 0; i < 8; ++i) reg["inventory"]["gpus"].push_back(Json{{"index", i}, {"model", "A100-80GB"}, {"mig_enabled", false}});
  auto r = server.post("/api/v1/agent/register", t, reg);
  ASSERT_EQ(r.status, 200) << r.raw;
  s = scrape();
  const double age = server::value_of(s, "tessera_agent_heartbeat_age_seconds", {{"node", "a100-0"}});
  EXPECT_GE(age, 0);
  EXPECT_LT(age, 5);
  EXPECT_TRUE(std::isnan(server::value_of(s, "tessera_agent_heartbeat_age_seconds", {{"node", "a100-1"}})));
  EXPECT_EQ(server::value_of(s, "tessera_node_ready", {{"node", "a100-0"}}), 1);
  EXPECT_EQ(server::value_of(s, "tessera_gpus", {{"model", "A100-80GB"}, {"pool", "default"}, {"state", "down"}}), 16);

  // A job placed on the node whose agent then does not report its task is lost and waits out its
  // restart backoff.
  r = server.post("/api/v1/jobs", t, job("alpha", "team-a"));
  ASSERT_EQ(r.status, 201) << r.raw;
  const std::string path = "/api/v1/jobs/" + std::to_string(r.body["id"].get<int64_t>());
  ASSERT_TRUE(eventually([&] { return server.get(path, t).body["state"] == "running"; }));
  const Json beat{{"node", "a100-0"}, {"tasks", Json::array()}};
  ASSERT_EQ(server.post("/api/v1/agent/heartbeat", t, beat).status, 200);  // offered
  ASSERT_EQ(server.post("/api/v1/agent/heartbeat", t, beat).status, 200);  // not reported: lost
  ASSERT_EQ(server.get(path, t).body["state"], "pending");
  s = scrape();
  EXPECT_EQ(server::value_of(s, "tessera_job_losses_total", {}), 1);
  EXPECT_GE(server::value_of(s, "tessera_lost_gpu_hours_total", {}), 0);
  EXPECT_EQ(server::value_of(s, "tessera_jobs_pending", {{"queue", "team-a"}, {"reason", "backoff"}}), 1);
  EXPECT_EQ(server::value_of(s, "tessera_preemptions_total", {}), 0);
}

}  // namespace
}  // namespace tessera::testing
