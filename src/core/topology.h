// Topology inside a node (GPU-to-GPU links as `nvidia-smi topo -m` shows them) and across nodes
// (ordered network levels such as `zone > spine > leaf`, each node's path through them).
// Immutable after construction; safe to share for reading.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace tessera {

// Link between two GPUs of one node, best first. kNvLink carries a bonded link count (NV#).
enum class LinkLevel : uint8_t { kSelf, kNvLink, kPix, kPxb, kPhb, kNode, kSys };

struct GpuLink {
  LinkLevel level = LinkLevel::kSys;
  uint8_t nvlinks = 0;  // for kNvLink: number of bonded links (NV12, NV18, ...)
};

class NodeTopology {
 public:
  NodeTopology() = default;
  // All GPUs connected through NVSwitch with `links` NVLinks each (DGX/HGX: NV12 A100, NV18 H100).
  static NodeTopology nvswitch(int gpus, int links);
  // NVLink bridges on pairs (0,1), (2,3), ... with `links` each; first half of GPUs on NUMA 0, rest on
  // NUMA 1 (pairs on the same NUMA node are NODE, across NUMA SYS).
  static NodeTopology nvlink_pairs(int gpus, int links);
  // Plain PCIe: pairs (0,1),(2,3).. share a switch (PIX), same NUMA half NODE, across halves SYS.
  static NodeTopology pcie(int gpus);
  // Parses the GPU rows of `nvidia-smi topo -m` (header line, then one row per GPU; only GPU columns
  // are read). Error names the row/column and the token it did not understand.
  static Result<NodeTopology> parse_topo_matrix(std::string_view text);

  int gpu_count() const { return n_; }
  GpuLink link(int a, int b) const { return links_[a * n_ + b]; }
  // Bandwidth rank of a link, higher is better: NV# scores 100 + #, then PIX 40, PXB 30, PHB 20,
  // NODE 10, SYS 0. Integer so that GPU-set comparisons are exact.
  int link_score(int a, int b) const;
  // Worst link score inside a GPU set (a collective runs at the pace of its slowest link).
  int min_link_score(const std::vector<uint16_t>& gpus) const;
  int sum_link_score(const std::vector<uint16_t>& gpus) const;
  std::string kind_name() const;  // "nvswitch", "nvlink-pairs", "pcie", "custom"
  bool operator==(const NodeTopology&) const = default;

 private:
  int n_ = 0;
  std::vector<GpuLink> links_;
  std::string kind_ = "custom";
};

// Network levels above the node, outermost first, e.g. {"zone", "spine", "leaf"}. The implicit
// innermost level is "node". Domains at each level are interned to dense ids.
class NetworkLevels {
 public:
  NetworkLevels() = default;
  explicit NetworkLevels(std::vector<std::string> names) : names_(std::move(names)), domains_(names_.size()) {}
  const std::vector<std::string>& names() const { return names_; }
  int count() const { return static_cast<int>(names_.size()); }
  // Index of a level by name; count() for "node"; error lists the known levels.
  Result<int> level_index(std::string_view name) const;
  uint32_t intern(int level, const std::string& domain);
  const std::string& domain_name(int level, uint32_t id) const { return domains_[level][id]; }
  uint32_t domain_count(int level) const { return static_cast<uint32_t>(domains_[level].size()); }

 private:
  std::vector<std::string> names_;
  std::vector<std::vector<std::string>> domains_;
};

}  // namespace tessera
