#include "server/metrics.h"

#include <algorithm>
#include <cassert>
#include <charconv>
#include <cmath>
#include <set>

namespace tessera::server::metrics {

namespace {

bool name_start(char c, bool colon_ok) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (colon_ok && c == ':');
}
bool name_char(char c, bool colon_ok) { return name_start(c, colon_ok) || (c >= '0' && c <= '9'); }

bool valid_name(std::string_view n, bool colon_ok) {
  if (n.empty() || !name_start(n[0], colon_ok)) return false;
  return std::all_of(n.begin(), n.end(), [colon_ok](char c) { return name_char(c, colon_ok); });
}

void write_labels(std::string& out, const std::vector<std::string>& names, const LabelValues& values,
                  const std::string* le = nullptr) {
  if (names.empty() && !le) return;
  out += '{';
  for (size_t i = 0; i < names.size(); ++i) {
    if (i) out += ',';
    out += names[i];
    out += "=\"";
    out += escape_label_value(values[i]);
    out += '"';
  }
  if (le) {
    if (!names.empty()) out += ',';
    out += "le=\"";
    out += *le;
    out += '"';
  }
  out += '}';
}

void write_sample(std::string& out, const std::string& name, const std::vector<std::string>& label_names,
                  const LabelValues& values, double v, const std::string* le = nullptr) {
  out += name;
  write_labels(out, label_names, values, le);
  out += ' ';
  out += format_value(v);
  out += '\n';
}

}  // namespace

const char* type_name(Type t) {
  switch (t) {
    case Type::kCounter: return "counter";
    case Type::kGauge: return "gauge";
    case Type::kHistogram: return "histogram";
  }
  return "untyped";
}

bool valid_metric_name(std::string_view name) { return valid_name(name, true); }

bool valid_label_name(std::string_view name) { return valid_name(name, false) && name.rfind("__", 0) != 0; }

std::string escape_label_value(std::string_view v) {
  std::string out;
  out.reserve(v.size());
  for (char c : v) {
    if (c == '\\') out += "\\\\";
    else if (c == '"') out += "\\\"";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

std::string escape_help(std::string_view v) {
  std::string out;
  out.reserve(v.size());
  for (char c : v) {
    if (c == '\\') out += "\\\\";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

std::string format_value(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  if (v == std::trunc(v) && std::fabs(v) <= 9007199254740992.0) {  // 2^53: exact integers
    char buf[32];
    auto r = std::to_chars(buf, buf + sizeof buf, int64_t(v));
    return std::string(buf, r.ptr);
  }
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, v);  // shortest round-trip form
  return std::string(buf, r.ptr);
}

std::vector<double> latency_buckets() {
  return {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};
}

Status check_family(const std::string& name, const std::vector<std::string>& label_names, Type type,
                    const std::vector<double>& bounds) {
  if (!valid_metric_name(name))
    return invalid_argument("name: \"" + name + "\" is not a metric name ([a-zA-Z_:][a-zA-Z0-9_:]*)");
  std::set<std::string> seen;
  for (const std::string& l : label_names) {
    if (!valid_label_name(l))
      return invalid_argument("label_names: \"" + l + "\" of " + name +
                              " is not a label name ([a-zA-Z_][a-zA-Z0-9_]*, not starting with __)");
    if (type == Type::kHistogram && l == "le")
      return invalid_argument("label_names: \"le\" of " + name + " is reserved for histogram buckets");
    if (!seen.insert(l).second) return invalid_argument("label_names: \"" + l + "\" given twice for " + name);
  }
  if (type == Type::kHistogram) {
    if (bounds.empty()) return invalid_argument("bounds: histogram " + name + " needs at least one bucket bound");
    for (size_t i = 0; i < bounds.size(); ++i) {
      if (!std::isfinite(bounds[i]))
        return invalid_argument("bounds: histogram " + name + " has a non-finite bound (+Inf is implicit)");
      if (i > 0 && !(bounds[i] > bounds[i - 1]))
        return invalid_argument("bounds: histogram " + name + " bounds must be strictly increasing");
    }
  } else if (!bounds.empty()) {
    return invalid_argument("bounds: only histograms have bucket bounds (" + name + ")");
  }
  return {};
}

Result<Family> make_family(std::string name, std::string help, Type type, std::vector<std::string> label_names,
                           std::vector<double> bounds) {
  if (Status s = check_family(name, label_names, type, bounds); !s.ok()) return s.error();
  Family f;
  f.name = std::move(name);
  f.help = std::move(help);
  f.type = type;
  f.label_names = std::move(label_names);
  f.bounds = std::move(bounds);
  return f;
}

std::string render(std::vector<Family> families) {
  std::stable_sort(families.begin(), families.end(), [](const Family& a, const Family& b) { return a.name < b.name; });
  std::string out;
  const std::string* last = nullptr;
  for (const Family& f : families) {
    if (last && *last == f.name) continue;  // a name is one family
    last = &f.name;
    out += "# HELP " + f.name + " " + escape_help(f.help) + "\n";
    out += "# TYPE " + f.name + " " + type_name(f.type) + "\n";
    if (f.type != Type::kHistogram) {
      for (const auto& [labels, v] : f.values)
        if (labels.size() == f.label_names.size()) write_sample(out, f.name, f.label_names, labels, v);
      continue;
    }
    const std::string bucket = f.name + "_bucket";
    for (const auto& [labels, h] : f.histograms) {
      if (labels.size() != f.label_names.size() || h.counts.size() != f.bounds.size() + 1) continue;
      uint64_t cumulative = 0;
      for (size_t i = 0; i < f.bounds.size(); ++i) {
        cumulative += h.counts[i];
        const std::string le = format_value(f.bounds[i]);
        write_sample(out, bucket, f.label_names, labels, double(cumulative), &le);
      }
      cumulative += h.counts.back();
      const std::string inf = "+Inf";
      write_sample(out, bucket, f.label_names, labels, double(cumulative), &inf);
      write_sample(out, f.name + "_sum", f.label_names, labels, h.sum);
      write_sample(out, f.name + "_count", f.label_names, labels, double(cumulative));
    }
  }
  return out;
}

// ---- live families ------------------------------------------------------------------------------

void CounterFamily::inc(const LabelValues& labels, double by) {
  assert(labels.size() == f_.label_names.size());
  if (labels.size() != f_.label_names.size() || !(by >= 0)) return;
  std::lock_guard lock(mu_);
  f_.values[labels] += by;
}

double CounterFamily::value(const LabelValues& labels) const {
  std::lock_guard lock(mu_);
  auto it = f_.values.find(labels);
  return it == f_.values.end() ? 0 : it->second;
}

Family CounterFamily::snapshot() const {
  std::lock_guard lock(mu_);
  return f_;
}

void GaugeFamily::set(const LabelValues& labels, double v) {
  assert(labels.size() == f_.label_names.size());
  if (labels.size() != f_.label_names.size()) return;
  std::lock_guard lock(mu_);
  f_.values[labels] = v;
}

void GaugeFamily::add(const LabelValues& labels, double by) {
  assert(labels.size() == f_.label_names.size());
  if (labels.size() != f_.label_names.size()) return;
  std::lock_guard lock(mu_);
  f_.values[labels] += by;
}

double GaugeFamily::value(const LabelValues& labels) const {
  std::lock_guard lock(mu_);
  auto it = f_.values.find(labels);
  return it == f_.values.end() ? 0 : it->second;
}

void GaugeFamily::clear() {
  std::lock_guard lock(mu_);
  f_.values.clear();
}

Family GaugeFamily::snapshot() const {
  std::lock_guard lock(mu_);
  return f_;
}

void HistogramFamily::observe(const LabelValues& labels, double v) {
  assert(labels.size() == f_.label_names.size());
  if (labels.size() != f_.label_names.size() || std::isnan(v)) return;
  const size_t bucket = size_t(std::lower_bound(f_.bounds.begin(), f_.bounds.end(), v) - f_.bounds.begin());
  std::lock_guard lock(mu_);
  HistogramData& h = f_.histograms[labels];
  if (h.counts.empty()) h.counts.assign(f_.bounds.size() + 1, 0);
  ++h.counts[bucket];
  h.sum += v;
  ++h.count;
}

HistogramData HistogramFamily::data(const LabelValues& labels) const {
  std::lock_guard lock(mu_);
  auto it = f_.histograms.find(labels);
  if (it != f_.histograms.end()) return it->second;
  HistogramData empty;
  empty.counts.assign(f_.bounds.size() + 1, 0);
  return empty;
}

Family HistogramFamily::snapshot() const {
  std::lock_guard lock(mu_);
  return f_;
}

// ---- registry -----------------------------------------------------------------------------------

Status Registry::claim(const std::string& name) {
  if (names_.count(name)) return invalid_argument("name: metric " + name + " is already registered");
  return {};
}

Result<CounterFamily*> Registry::counter(std::string name, std::string help, std::vector<std::string> label_names) {
  auto f = make_family(std::move(name), std::move(help), Type::kCounter, std::move(label_names));
  if (!f.ok()) return f.error();
  std::lock_guard lock(mu_);
  if (Status s = claim(f->name); !s.ok()) return s.error();
  names_[f->name] = Type::kCounter;
  if (f->label_names.empty()) f->values[{}] = 0;  // a plain counter reads 0 before its first event
  counters_.push_back(std::unique_ptr<CounterFamily>(new CounterFamily(std::move(*f))));
  return counters_.back().get();
}

Result<GaugeFamily*> Registry::gauge(std::string name, std::string help, std::vector<std::string> label_names) {
  auto f = make_family(std::move(name), std::move(help), Type::kGauge, std::move(label_names));
  if (!f.ok()) return f.error();
  std::lock_guard lock(mu_);
  if (Status s = claim(f->name); !s.ok()) return s.error();
  names_[f->name] = Type::kGauge;
  gauges_.push_back(std::unique_ptr<GaugeFamily>(new GaugeFamily(std::move(*f))));
  return gauges_.back().get();
}

Result<HistogramFamily*> Registry::histogram(std::string name, std::string help, std::vector<std::string> label_names,
                                             std::vector<double> bounds) {
  auto f = make_family(std::move(name), std::move(help), Type::kHistogram, std::move(label_names), std::move(bounds));
  if (!f.ok()) return f.error();
  std::lock_guard lock(mu_);
  if (Status s = claim(f->name); !s.ok()) return s.error();
  names_[f->name] = Type::kHistogram;
  if (f->label_names.empty()) f->histograms[{}].counts.assign(f->bounds.size() + 1, 0);
  histograms_.push_back(std::unique_ptr<HistogramFamily>(new HistogramFamily(std::move(*f))));
  return histograms_.back().get();
}

std::vector<Family> Registry::collect() const {
  std::lock_guard lock(mu_);
  std::vector<Family> out;
  for (const auto& c : counters_) out.push_back(c->snapshot());
  for (const auto& g : gauges_) out.push_back(g->snapshot());
  for (const auto& h : histograms_) out.push_back(h->snapshot());
  return out;
}

}  // namespace tessera::server::metrics
