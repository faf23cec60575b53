// A small Prometheus metrics library: counter, gauge and histogram families with label sets, and
// the text exposition format 0.0.4 (docs/metrics.md).
//
// A family is a metric name, its help text, its label names (in a fixed order) and one value (or
// histogram) per label-value tuple. Names are checked when a family is created: metric names match
// [a-zA-Z_:][a-zA-Z0-9_:]*, label names [a-zA-Z_][a-zA-Z0-9_]* and may not start with "__"; "le" is
// reserved for histogram buckets. Output is deterministic: families sorted by name, samples by
// their label values, labels in the family's declared order; never hash order.
//
// Thread-safety: each live family (CounterFamily, GaugeFamily, HistogramFamily) has its own mutex;
// any thread may update or snapshot it. A Registry owns its families and is thread-safe; families
// live as long as their registry. Family snapshots (struct Family) are plain values.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace tessera::server::metrics {

enum class Type : uint8_t { kCounter, kGauge, kHistogram };
const char* type_name(Type t);  // "counter", "gauge", "histogram"

bool valid_metric_name(std::string_view name);
bool valid_label_name(std::string_view name);
// Label values: backslash, double quote and newline escaped (\\, \", \n).
std::string escape_label_value(std::string_view v);
// HELP text: backslash and newline escaped.
std::string escape_help(std::string_view v);
// A sample value as the format writes it: integers exactly (up to 2^53), otherwise the shortest
// text that reads back to the same double; NaN, +Inf, -Inf.
std::string format_value(double v);

// Label values, one per label name of the family, in the family's order.
using LabelValues = std::vector<std::string>;

// Default buckets for latencies in seconds (0.5 ms .. 10 s).
std::vector<double> latency_buckets();

struct HistogramData {
  std::vector<uint64_t> counts;  // per bucket, not cumulative; one more than the bounds (+Inf)
  double sum = 0;
  uint64_t count = 0;
};

// One family's samples at one moment: what render() writes.
struct Family {
  std::string name;
  std::string help;
  Type type = Type::kGauge;
  std::vector<std::string> label_names;
  std::map<LabelValues, double> values;             // counters and gauges
  std::vector<double> bounds;                       // histograms: bucket upper bounds, ascending
  std::map<LabelValues, HistogramData> histograms;  // histograms
};

// Checks a family's name, label names and (histograms) bucket bounds; errors name the field.
Status check_family(const std::string& name, const std::vector<std::string>& label_names, Type type,
                    const std::vector<double>& bounds = {});
// An empty family (no samples) after check_family.
Result<Family> make_family(std::string name, std::string help, Type type, std::vector<std::string> label_names,
                           std::vector<double> bounds = {});

// Text exposition format 0.0.4: families sorted by name (a name given twice: the first kept, the
// others dropped); per family "# HELP", "# TYPE", then its samples. Histograms write cumulative
// name_bucket{...,le="B"} lines ending with le="+Inf", then name_sum and name_count.
std::string render(std::vector<Family> families);

class CounterFamily {
 public:
  // Adds `by` (>= 0; negative or NaN increments are ignored: counters only go up). A wrong number
  // of label values is ignored too (a programming error; asserted in debug builds).
  void inc(const LabelValues& labels = {}, double by = 1);
  double value(const LabelValues& labels = {}) const;
  Family snapshot() const;

 private:
  friend class Registry;
  explicit CounterFamily(Family f) : f_(std::move(f)) {}
  mutable std::mutex mu_;
  Family f_;
};

class GaugeFamily {
 public:
  void set(const LabelValues& labels, double v);
  void add(const LabelValues& labels, double by);
  double value(const LabelValues& labels = {}) const;
  void clear();  // drops every label set (for gauges rebuilt from scratch)
  Family snapshot() const;

 private:
  friend class Registry;
  explicit GaugeFamily(Family f) : f_(std::move(f)) {}
  mutable std::mutex mu_;
  Family f_;
};

class HistogramFamily {
 public:
  // A value v falls in the first bucket whose bound is >= v (bounds are inclusive upper bounds).
  void observe(const LabelValues& labels, double v);
  HistogramData data(const LabelValues& labels = {}) const;
  Family snapshot() const;

 private:
  friend class Registry;
  explicit HistogramFamily(Family f) : f_(std::move(f)) {}
  mutable std::mutex mu_;
  Family f_;
};

// Owns families; names are unique within a registry.
class Registry {
 public:
  Result<CounterFamily*> counter(std::string name, std::string help, std::vector<std::string> label_names = {});
  Result<GaugeFamily*> gauge(std::string name, std::string help, std::vector<std::string> label_names = {});
  Result<HistogramFamily*> histogram(std::string name, std::string help, std::vector<std::string> label_names,
                                     std::vector<double> bounds);
  std::vector<Family> collect() const;
  std::string text() const { return render(collect()); }

 private:
  Status claim(const std::string& name);
  mutable std::mutex mu_;
  std::map<std::string, Type> names_;
  std::vector<std::unique_ptr<CounterFamily>> counters_;
  std::vector<std::unique_ptr<GaugeFamily>> gauges_;
  std::vector<std::unique_ptr<HistogramFamily>> histograms_;
};

}  // namespace tessera::server::metrics

namespace tessera::server {
// The API route pattern of a request path for the request metrics, ids replaced
// ("/api/v1/jobs/17/logs" -> "/api/v1/jobs/{id}/logs"), "other" when it is no route of the API:
// bounded cardinality, never raw paths. Implemented in metrics_routes.cc.
std::string route_pattern(std::string_view path);
}  // namespace tessera::server
