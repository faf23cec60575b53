#include "sim/openb.h"

#include <charconv>
#include <fstream>

namespace tessera::sim {
namespace {

std::vector<std::string> split(const std::string& line, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    const size_t p = line.find(sep, start);
    out.push_back(line.substr(start, p == std::string::npos ? std::string::npos : p - start));
    if (p == std::string::npos) break;
    start = p + 1;
  }
  return out;
}

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\r' || s.back() == ' ' || s.back() == '\t')) s.pop_back();
  size_t i = 0;
  while (i < s.size() && (s[i] == ' ' || s[i] == '\t')) ++i;
  return s.substr(i);
}

// A CSV table read row by row, with columns looked up by header name.
class CsvReader {
 public:
  CsvReader(std::istream& in, std::string source) : in_(in), source_(std::move(source)) {}

  Status read_header(const std::vector<std::string>& required) {
    std::string line;
    if (!std::getline(in_, line)) return invalid_argument(source_ + ": empty file, expected a header line");
    line_no_ = 1;
    header_ = split(trim(line), ',');
    for (auto& h : header_) h = trim(h);
    for (const std::string& r : required)
      if (column(r) < 0) return invalid_argument(source_ + ":1: missing column '" + r + "' in header");
    return {};
  }
  int column(const std::string& name) const {
    for (size_t i = 0; i < header_.size(); ++i)
      if (header_[i] == name) return int(i);
    return -1;
  }
  // Next non-empty row; false at end.
  bool next() {
    std::string line;
    while (std::getline(in_, line)) {
      ++line_no_;
      line = trim(line);
      if (line.empty()) continue;
      row_ = split(line, ',');
      return true;
    }
    return false;
  }
  Status check_width() const {
    if (row_.size() < header_.size())
      return error("", "has " + std::to_string(row_.size()) + " fields, the header has " +
                           std::to_string(header_.size()));
    return {};
  }
  std::string field(const std::string& name) const {
    const int c = column(name);
    return c >= 0 && c < int(row_.size()) ? trim(row_[c]) : std::string();
  }
  Result<int64_t> integer(const std::string& name, int64_t lo, int64_t hi) const {
    const std::string s = field(name);
    int64_t v = 0;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc() || p != s.data() + s.size() || s.empty())
      return error(name, "expected an integer, got \"" + s + "\"");
    if (v < lo || v > hi)
      return error(name, "must be in " + std::to_string(lo) + ".." + std::to_string(hi) + ", got " + s);
    return v;
  }
  Error error(const std::string& field, const std::string& what) const {
    return invalid_argument(source_ + ":" + std::to_string(line_no_) + (field.empty() ? "" : ": field '" + field + "'") +
                            ": " + what);
  }

 private:
  std::istream& in_;
  std::string source_;
  std::vector<std::string> header_, row_;
  int line_no_ = 0;
};

constexpr int64_t kMaxInt = int64_t(1) << 40;

}  // namespace

Result<ClusterState> parse_openb_nodes(std::istream& in, const std::string& source, const GpuCatalog& catalog) {
  CsvReader csv(in, source);
  if (Status s = csv.read_header({"sn", "cpu_milli", "memory_mib", "gpu", "model"}); !s.ok()) return s.error();
  ClusterState cluster(catalog);
  while (csv.next()) {
    if (Status s = csv.check_width(); !s.ok()) return s.error();
    NodeSpec spec;
    spec.name = csv.field("sn");
    if (spec.name.empty()) return csv.error("sn", "empty node name");
    auto cpu = csv.integer("cpu_milli", 0, kMaxInt);
    if (!cpu) return cpu.error();
    auto mem = csv.integer("memory_mib", 0, kMaxInt);
    if (!mem) return mem.error();
    auto gpus = csv.integer("gpu", 0, 16);
    if (!gpus) return gpus.error();
    spec.cpu = MilliCpu(*cpu);
    spec.memory = MiB(*mem);
    spec.gpu_count = int(*gpus);
    if (spec.gpu_count > 0) {
      spec.gpu_model = csv.field("model");
      if (spec.gpu_model.empty()) return csv.error("model", "a node with GPUs needs a GPU model");
      if (auto m = catalog.find(spec.gpu_model); !m) return csv.error("model", m.error().message);
    }
    if (auto r = cluster.add_node(std::move(spec)); !r) return csv.error("", r.error().message);
  }
  return cluster;
}

Result<std::vector<OpenbPod>> parse_openb_pods(std::istream& in, const std::string& source, const GpuCatalog& catalog) {
  CsvReader csv(in, source);
  if (Status s = csv.read_header({"name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli"}); !s.ok())
    return s.error();
  const bool has_spec = csv.column("gpu_spec") >= 0;
  const bool has_times = csv.column("creation_time") >= 0 && csv.column("deletion_time") >= 0 &&
                         csv.column("scheduled_time") >= 0;
  std::vector<OpenbPod> pods;
  while (csv.next()) {
    if (Status s = csv.check_width(); !s.ok()) return s.error();
    OpenbPod p;
    p.name = csv.field("name");
    if (p.name.empty()) return csv.error("name", "empty pod name");
    auto cpu = csv.integer("cpu_milli", 0, kMaxInt);
    if (!cpu) return cpu.error();
    auto mem = csv.integer("memory_mib", 0, kMaxInt);
    if (!mem) return mem.error();
    auto gpus = csv.integer("num_gpu", 0, 16);
    if (!gpus) return gpus.error();
    TaskRequest& t = p.task;
    t.cpu = MilliCpu(*cpu);
    t.memory = MiB(*mem);
    if (*gpus > 0) {
      auto milli = csv.integer("gpu_milli", 1, 1000);
      if (!milli) return milli.error();
      t.gpu_count = int(*gpus);
      t.milli_per_gpu = MilliGpu(*milli);
      if (has_spec) {
        const std::string spec = csv.field("gpu_spec");
        if (!spec.empty())
          for (const std::string& name : split(spec, '|')) {
            auto m = catalog.find(trim(name));
            if (!m) return csv.error("gpu_spec", m.error().message);
            t.gpu_models.push_back((*m)->name);
          }
      }
    }
    if (Status s = t.validate(); !s.ok()) return csv.error("", s.message());
    p.qos = csv.field("qos");
    if (has_times) {
      OpenbTimes& tm = p.times.emplace();
      auto created = csv.integer("creation_time", 0, kMaxInt);
      if (!created) return created.error();
      auto deleted = csv.integer("deletion_time", 0, kMaxInt);
      if (!deleted) return deleted.error();
      tm.creation = *created;
      tm.deletion = *deleted;
      if (!csv.field("scheduled_time").empty()) {
        auto scheduled = csv.integer("scheduled_time", 0, kMaxInt);
        if (!scheduled) return scheduled.error();
        tm.scheduled = *scheduled;
      }
    }
    pods.push_back(std::move(p));
  }
  return pods;
}

namespace {
template <class T, class F>
Result<T> with_file(const std::string& path, F parse) {
  std::ifstream in(path);
  if (!in) return invalid_argument(path + ": cannot open file");
  return parse(in);
}
}  // namespace

Result<ClusterState> load_openb_nodes(const std::string& path, const GpuCatalog& catalog) {
  return with_file<ClusterState>(path, [&](std::istream& in) { return parse_openb_nodes(in, path, catalog); });
}

Result<std::vector<OpenbPod>> load_openb_pods(const std::string& path, const GpuCatalog& catalog) {
  return with_file<std::vector<OpenbPod>>(path, [&](std::istream& in) { return parse_openb_pods(in, path, catalog); });
}

}  // namespace tessera::sim
