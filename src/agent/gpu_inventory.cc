// Backend-independent parts of GPU discovery: link names, the JSON and text forms of an Inventory,
// and the helpers both backends share (stable hashes, model matching, MIG layout planning).
#include "agent/gpu_inventory.h"

#include <algorithm>
#include <cstdio>
#include <set>
#include <sstream>
#include <utility>

#include "agent/gpu_internal.h"
#include "core/mig.h"

namespace tessera::agent {

const char* gpu_link_name(GpuLink l) {
  switch (l) {
    case GpuLink::kSelf: return "X";
    case GpuLink::kNvSwitch: return "NVS";   // NVLink through NVSwitch (nvidia-smi prints NV#)
    case GpuLink::kNvLink: return "NV";      // direct NVLink (bridge or mesh; nvidia-smi prints NV#)
    case GpuLink::kPciSwitch: return "PIX";  // PCIe switch(es), no host bridge (PIX/PXB)
    case GpuLink::kHostBridge: return "PHB";
    case GpuLink::kNuma: return "NODE";
    case GpuLink::kSystem: return "SYS";
  }
  return "?";
}

namespace {

// The `topo -m` cell: NV<count> for NVLink/NVSwitch when the count is known, else the short name.
std::string link_cell(const Inventory& inv, size_t i, size_t j) {
  const GpuLink l = inv.links[i][j];
  if (l == GpuLink::kNvLink || l == GpuLink::kNvSwitch) {
    const int n = i < inv.nvlink_count.size() && j < inv.nvlink_count[i].size() ? inv.nvlink_count[i][j] : 0;
    if (n > 0) return "NV" + std::to_string(n);
  }
  return gpu_link_name(l);
}

std::string pad(std::string s, size_t w) {
  if (s.size() < w) s.append(w - s.size(), ' ');
  return s;
}

std::string gib(int64_t mib) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%lld.%01lld GiB", static_cast<long long>(mib / 1024),
                static_cast<long long>(mib % 1024 * 10 / 1024));
  return buf;
}

}  // namespace

nlohmann::json inventory_to_json(const Inventory& inv) {
  nlohmann::json gpus = nlohmann::json::array();
  for (const GpuInfo& g : inv.gpus) {
    nlohmann::json instances = nlohmann::json::array();
    for (const MigInstanceInfo& m : g.instances) {
      instances.push_back({{"profile", m.profile},
                           {"start", m.start},
                           {"size", m.size},
                           {"uuid", m.uuid},
                           {"gpu_instance_id", m.gpu_instance_id},
                           {"compute_instance_id", m.compute_instance_id},
                           {"memory_used_mib", m.memory_used_mib}});
    }
    gpus.push_back({{"index", g.index},
                    {"uuid", g.uuid},
                    {"model", g.model},
                    {"nvml_name", g.nvml_name},
                    {"memory_mib", g.memory_mib},
                    {"mig_enabled", g.mig_enabled},
                    {"instances", std::move(instances)},
                    {"utilization_pct", g.utilization_pct},
                    {"memory_used_mib", g.memory_used_mib}});
  }
  nlohmann::json links = nlohmann::json::array();
  for (const auto& row : inv.links) {
    nlohmann::json r = nlohmann::json::array();
    for (GpuLink l : row) r.push_back(gpu_link_name(l));
    links.push_back(std::move(r));
  }
  return {{"source", inv.source},
          {"driver_version", inv.driver_version},
          {"gpus", std::move(gpus)},
          {"links", std::move(links)},
          {"nvlink_count", inv.nvlink_count}};
}

std::string inventory_report(const Inventory& inv) {
  std::ostringstream out;
  out << "GPU inventory: source " << inv.source << ", driver "
      << (inv.driver_version.empty() ? "-" : inv.driver_version) << ", " << inv.gpus.size() << " GPU"
      << (inv.gpus.size() == 1 ? "" : "s") << "\n\n";

  // GPU table; column widths follow the longest cell.
  const std::vector<std::string> head = {"GPU", "UUID", "MODEL", "MEMORY", "MIG", "UTIL", "MEM USED"};
  std::vector<std::vector<std::string>> rows;
  for (const GpuInfo& g : inv.gpus) {
    std::string model = g.model;
    if (!g.nvml_name.empty() && g.nvml_name != g.model) model += " (" + g.nvml_name + ")";
    rows.push_back({std::to_string(g.index), g.uuid, model, gib(g.memory_mib), g.mig_enabled ? "on" : "off",
                    g.utilization_pct < 0 ? "-" : std::to_string(g.utilization_pct) + "%",
                    g.memory_used_mib < 0 ? "-" : std::to_string(g.memory_used_mib) + " MiB"});
  }
  std::vector<size_t> width(head.size());
  for (size_t c = 0; c < head.size(); ++c) {
    width[c] = head[c].size();
    for (const auto& r : rows) width[c] = std::max(width[c], r[c].size());
  }
  auto line = [&](const std::vector<std::string>& cells) {
    std::string s;
    for (size_t c = 0; c < cells.size(); ++c) s += c + 1 < cells.size() ? pad(cells[c], width[c] + 2) : cells[c];
    out << s << "\n";
  };
  line(head);
  for (const auto& r : rows) line(r);

  // MIG instances per GPU.
  bool any_mig = false;
  for (const GpuInfo& g : inv.gpus) any_mig = any_mig || g.mig_enabled;
  if (any_mig) {
    out << "\nMIG instances:\n";
    for (const GpuInfo& g : inv.gpus) {
      if (!g.mig_enabled) continue;
      out << "  GPU" << g.index << ":";
      if (g.instances.empty()) out << " none (MIG mode on, no instances)";
      out << "\n";
      for (const MigInstanceInfo& m : g.instances) {
        const std::string placement = std::to_string(m.start) + ":" + std::to_string(m.size);
        out << "    " << pad(m.profile, 12) << " placement " << pad(placement, 5)
            << " " << (m.uuid.empty() ? "(no compute instance)" : m.uuid);
        if (m.gpu_instance_id >= 0) out << "  GI " << m.gpu_instance_id << " CI " << m.compute_instance_id;
        if (m.memory_used_mib >= 0) out << "  " << m.memory_used_mib << " MiB used";
        out << "\n";
      }
    }
  }

  // Link matrix, nvidia-smi `topo -m` style.
  if (!inv.gpus.empty() && inv.links.size() == inv.gpus.size()) {
    out << "\nLinks:\n";
    const size_t w = 6;
    std::string s = pad("", w);
    for (size_t j = 0; j < inv.gpus.size(); ++j) s += pad("GPU" + std::to_string(j), w);
    while (!s.empty() && s.back() == ' ') s.pop_back();
    out << s << "\n";
    for (size_t i = 0; i < inv.gpus.size(); ++i) {
      s = pad("GPU" + std::to_string(i), w);
      for (size_t j = 0; j < inv.gpus.size() && j < inv.links[i].size(); ++j) s += pad(link_cell(inv, i, j), w);
      while (!s.empty() && s.back() == ' ') s.pop_back();
      out << s << "\n";
    }
    out << "\nLegend: X = self, NV# = # bonded NVLinks (direct or through NVSwitch), PIX = PCIe switch,\n"
           "        PHB = PCIe host bridge, NODE = host bridges within a NUMA node, SYS = across NUMA nodes\n";
  }
  return out.str();
}

namespace detail {

uint64_t fnv1a64(std::string_view s, uint64_t seed) {
  uint64_t h = seed;
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

std::string synthetic_uuid(std::string_view prefix, std::string_view key) {
  // 128 bits from two FNV-1a passes (the second over the key with a distinct suffix), each put through
  // the splitmix64 finaliser so that keys differing in one character ("node/gpu/0", ".../1") give
  // unrelated-looking UUIDs.
  auto mix = [](uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  };
  const uint64_t hi = mix(fnv1a64(key));
  const uint64_t lo = mix(fnv1a64(std::string(key) + "#lo"));
  char buf[40];
  std::snprintf(buf, sizeof buf, "%08llx-%04llx-%04llx-%04llx-%012llx", static_cast<unsigned long long>(hi >> 32),
                static_cast<unsigned long long>(hi >> 16 & 0xffff), static_cast<unsigned long long>(hi & 0xffff),
                static_cast<unsigned long long>(lo >> 48), static_cast<unsigned long long>(lo & 0xffffffffffffull));
  return std::string(prefix) + buf;
}

const GpuModel* match_model(const GpuCatalog& catalog, std::string_view nvml_name) {
  std::string name(nvml_name);
  for (int pass = 0; pass < 3; ++pass) {
    if (auto m = catalog.find(name); m.ok()) return *m;
    bool stripped = false;
    for (const char* prefix : {"NVIDIA ", "Tesla "}) {
      const std::string p = prefix;
      if (name.size() > p.size() && name.compare(0, p.size(), p) == 0) {
        name = name.substr(p.size());
        stripped = true;
        break;
      }
    }
    if (!stripped) break;
  }
  return nullptr;
}

std::string profile_name(const GpuModel* model, int profile_id) {
  if (model) {
    if (const MigProfile* p = model->find_profile_id(profile_id)) return p->name;
  }
  return "profile-" + std::to_string(profile_id);
}

Result<MigPlan> plan_mig_layout(const GpuModel* model, const GpuInfo& current, const MigLayout& want,
                                const std::vector<std::string>& busy_uuids) {
  const std::string gpu = "GPU " + std::to_string(current.index);
  if (!model) {
    return failed_precondition(gpu + " (" + current.model + ") is not in the GPU catalog, so its MIG rules are "
                               "unknown; declare the model in config to manage its MIG layout");
  }
  if (!model->mig_capable()) {
    return failed_precondition(gpu + " (" + model->name + ") is not MIG-capable; it can only be used whole");
  }
  if (!current.mig_enabled) {
    return failed_precondition(gpu + " has MIG mode off; the agent never changes MIG mode (that may reset the "
                               "GPU): enable it with `nvidia-smi -i " + std::to_string(current.index) +
                               " -mig 1` while the GPU is idle, then retry");
  }
  // The wanted layout must satisfy the model's rules on its own (core's MigLayout decides).
  tessera::MigLayout rules(model);
  MigPlan plan;
  std::set<std::pair<std::string, int>> wanted;
  for (const auto& [name, start] : want.instances) {
    const MigProfile* p = model->find_profile(name);
    if (!p) {
      std::string known;
      for (const MigProfile& q : model->mig_profiles) known += (known.empty() ? "" : ", ") + q.name;
      return invalid_argument(gpu + ": " + model->name + " has no MIG profile '" + name + "'; its profiles are " +
                              known);
    }
    if (Status s = rules.create(*p, start); !s.ok()) {
      return Error{s.error().code, gpu + ": MIG layout rejected at " + p->name + "@" + std::to_string(start) + ": " +
                                       s.message()};
    }
    wanted.insert({p->name, start});
  }
  std::set<std::pair<std::string, int>> present;
  for (const MigInstanceInfo& m : current.instances) {
    const std::pair<std::string, int> key{m.profile, m.start};
    if (wanted.count(key) && !present.count(key)) {
      plan.keep.push_back(m);
      present.insert(key);
    } else {
      plan.destroy.push_back(m);
    }
  }
  for (const MigInstanceInfo& m : plan.destroy) {
    if (!m.uuid.empty() && std::find(busy_uuids.begin(), busy_uuids.end(), m.uuid) != busy_uuids.end()) {
      return failed_precondition(gpu + ": MIG instance " + m.profile + "@" + std::to_string(m.start) + " (" + m.uuid +
                                 ") is in use by a task and would have to be destroyed; drain it first");
    }
  }
  for (const auto& [name, start] : want.instances) {
    const MigProfile* p = model->find_profile(name);
    if (!present.count({p->name, start})) plan.create.push_back({p, start});
  }
  return plan;
}

}  // namespace detail
}  // namespace tessera::agent
