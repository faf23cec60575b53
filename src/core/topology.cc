#include "core/topology.h"

#include <algorithm>
#include <string>
#include <vector>

namespace tessera {

NodeTopology NodeTopology::nvswitch(int gpus, int links) {
  NodeTopology t;
  t.n_ = gpus;
  t.kind_ = "nvswitch";
  t.links_.assign(size_t(gpus) * gpus, GpuLink{LinkLevel::kNvLink, uint8_t(links)});
  for (int i = 0; i < gpus; ++i) t.links_[i * gpus + i] = {LinkLevel::kSelf, 0};
  return t;
}

namespace {
// Default PCIe fabric: pairs share a switch, halves are NUMA nodes.
LinkLevel pcie_level(int a, int b, int n) {
  if (a / 2 == b / 2) return LinkLevel::kPix;
  const int half = std::max(1, n / 2);
  return (a / half == b / half) ? LinkLevel::kNode : LinkLevel::kSys;
}
}  // namespace

NodeTopology NodeTopology::pcie(int gpus) {
  NodeTopology t;
  t.n_ = gpus;
  t.kind_ = "pcie";
  t.links_.resize(size_t(gpus) * gpus);
  for (int a = 0; a < gpus; ++a)
    for (int b = 0; b < gpus; ++b) t.links_[a * gpus + b] = {a == b ? LinkLevel::kSelf : pcie_level(a, b, gpus), 0};
  return t;
}

NodeTopology NodeTopology::nvlink_pairs(int gpus, int links) {
  NodeTopology t = pcie(gpus);
  t.kind_ = "nvlink-pairs";
  for (int a = 0; a < gpus; ++a)
    for (int b = 0; b < gpus; ++b)
      if (a != b && a / 2 == b / 2) t.links_[a * gpus + b] = {LinkLevel::kNvLink, uint8_t(links)};
  return t;
}

namespace {
std::vector<std::string> split_ws(std::string_view line) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
    size_t j = i;
    while (j < line.size() && line[j] != ' ' && line[j] != '\t') ++j;
    if (j > i) out.emplace_back(line.substr(i, j - i));
    i = j;
  }
  return out;
}
}  // namespace

Result<NodeTopology> NodeTopology::parse_topo_matrix(std::string_view text) {
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> header;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    auto tokens = split_ws(text.substr(pos, end - pos));
    pos = end + 1;
    if (tokens.empty()) continue;
    if (header.empty()) {
      if (tokens[0].rfind("GPU", 0) != 0) continue;  // skip anything before the header
      header = tokens;
      continue;
    }
    if (tokens[0].rfind("GPU", 0) == 0) rows.push_back(tokens);
  }
  int n = 0;
  while (n < int(header.size()) && header[n] == "GPU" + std::to_string(n)) ++n;
  if (n == 0) return invalid_argument("topo matrix: no header line starting with GPU0 GPU1 ...");
  if (int(rows.size()) != n)
    return invalid_argument("topo matrix: header names " + std::to_string(n) + " GPUs but " +
                            std::to_string(rows.size()) + " GPU rows follow");
  NodeTopology t;
  t.n_ = n;
  t.links_.resize(size_t(n) * n);
  for (int a = 0; a < n; ++a) {
    if (rows[a][0] != "GPU" + std::to_string(a))
      return invalid_argument("topo matrix: row " + std::to_string(a) + " should be GPU" + std::to_string(a) +
                              ", got " + rows[a][0]);
    if (int(rows[a].size()) < n + 1)
      return invalid_argument("topo matrix: row GPU" + std::to_string(a) + " has fewer than " + std::to_string(n) +
                              " GPU columns");
    for (int b = 0; b < n; ++b) {
      const std::string& tok = rows[a][b + 1];
      GpuLink l;
      if (tok == "X") l = {LinkLevel::kSelf, 0};
      else if (tok == "PIX") l = {LinkLevel::kPix, 0};
      else if (tok == "PXB") l = {LinkLevel::kPxb, 0};
      else if (tok == "PHB") l = {LinkLevel::kPhb, 0};
      else if (tok == "NODE") l = {LinkLevel::kNode, 0};
      else if (tok == "SYS") l = {LinkLevel::kSys, 0};
      else if (tok.size() > 2 && tok.rfind("NV", 0) == 0 &&
               std::all_of(tok.begin() + 2, tok.end(), [](char c) { return c >= '0' && c <= '9'; }) &&
               tok.size() <= 4)
        l = {LinkLevel::kNvLink, uint8_t(std::stoi(tok.substr(2)))};
      else
        return invalid_argument("topo matrix: row GPU" + std::to_string(a) + " column GPU" + std::to_string(b) +
                                ": unknown link '" + tok + "' (expected X, NV#, PIX, PXB, PHB, NODE or SYS)");
      if ((a == b) != (l.level == LinkLevel::kSelf))
        return invalid_argument("topo matrix: 'X' must be exactly on the diagonal (row GPU" + std::to_string(a) + ")");
      t.links_[a * n + b] = l;
    }
  }
  bool all_nv = true;
  for (int a = 0; a < n; ++a)
    for (int b = 0; b < n; ++b) all_nv &= a == b || t.links_[a * n + b].level == LinkLevel::kNvLink;
  t.kind_ = all_nv ? "nvswitch" : "custom";
  return t;
}

int NodeTopology::link_score(int a, int b) const {
  const GpuLink l = link(a, b);
  switch (l.level) {
    case LinkLevel::kSelf: return 1000;
    case LinkLevel::kNvLink: return 100 + l.nvlinks;
    case LinkLevel::kPix: return 40;
    case LinkLevel::kPxb: return 30;
    case LinkLevel::kPhb: return 20;
    case LinkLevel::kNode: return 10;
    case LinkLevel::kSys: return 0;
  }
  return 0;
}

int NodeTopology::min_link_score(const std::vector<uint16_t>& gpus) const {
  int best = 1000;
  for (size_t i = 0; i < gpus.size(); ++i)
    for (size_t j = i + 1; j < gpus.size(); ++j) best = std::min(best, link_score(gpus[i], gpus[j]));
  return best;
}

int NodeTopology::sum_link_score(const std::vector<uint16_t>& gpus) const {
  int sum = 0;
  for (size_t i = 0; i < gpus.size(); ++i)
    for (size_t j = i + 1; j < gpus.size(); ++j) sum += link_score(gpus[i], gpus[j]);
  return sum;
}

std::string NodeTopology::kind_name() const { return kind_; }

Result<int> NetworkLevels::level_index(std::string_view name) const {
  if (name == "node") return count();
  for (int i = 0; i < count(); ++i)
    if (names_[i] == name) return i;
  std::string known;
  for (auto& n : names_) known += n + ", ";
  return invalid_argument("topology level '" + std::string(name) + "' is not defined; known levels: " + known +
                          "node");
}

uint32_t NetworkLevels::intern(int level, const std::string& domain) {
  auto& d = domains_[level];
  for (uint32_t i = 0; i < d.size(); ++i)
    if (d[i] == domain) return i;
  d.push_back(domain);
  return uint32_t(d.size() - 1);
}

}  // namespace tessera
