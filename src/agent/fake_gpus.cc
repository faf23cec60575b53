// The fake GPU backend: a declared inventory ("fake:8xH100-80GB-SXM,nvswitch,mig=3g.40gb@0+3g.40gb@4")
// that follows the catalog's model facts and core's MIG placement rules, for development and tests on
// machines without GPUs.
//
// Topologies (GpuLink between GPUs i != j, n GPUs, "halves" = [0, ceil(n/2)) and the rest, standing for
// two CPU sockets):
//   nvswitch    every pair kNvSwitch, NV<links per GPU>: 6 on NVLink2, 12 on NVLink3, 18 on NVLink4+
//               (V100 / DGX A100 NV12 / DGX H100 NV18). Needs a model with NVLink.
//   nvlink      bridged pairs: GPUs 2k and 2k+1 kNvLink with 4 links (a bridge, fake's choice); other
//               pairs as pcie-pairs. Needs a model with NVLink.
//   pcie-pairs  GPUs 2k and 2k+1 behind one PCIe switch (kPciSwitch); others kNuma within a half,
//               kSystem across halves.
//   pcie        kHostBridge within a half, kSystem across halves.
// Default: nvswitch when the model has NVLink (nvlink_generation > 0), else pcie.
//
// Utilisation: without set_fake_load every GPU is idle (0%, 0 MiB used). With a load of m milli-GPU on
// a GPU: utilization_pct = min(100, m / 10), memory_used_mib = memory * min(m, 1000) / 1000. MIG
// instances report memory_used_mib -1 (unknown): the load is per GPU, not per instance.
#include <algorithm>
#include <bit>
#include <cctype>
#include <charconv>

#include "agent/gpu_internal.h"
#include "agent/gpu_inventory.h"
#include "core/mig.h"

namespace tessera::agent {
namespace {

enum class Topo { kDefault, kNvSwitch, kNvLink, kPciePairs, kPcie };

int links_per_gpu(int nvlink_generation) {
  if (nvlink_generation <= 0) return 0;
  if (nvlink_generation == 1) return 4;  // P100 SXM2
  if (nvlink_generation == 2) return 6;
  if (nvlink_generation == 3) return 12;
  return 18;
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t b = 0;
  for (;;) {
    const size_t e = s.find(sep, b);
    out.push_back(s.substr(b, e == std::string::npos ? std::string::npos : e - b));
    if (e == std::string::npos) break;
    b = e + 1;
  }
  return out;
}

std::string mig_uuid(const std::string& gpu_uuid, const std::string& profile, int start) {
  return detail::synthetic_uuid("MIG-fake-", gpu_uuid + "/" + profile + "@" + std::to_string(start));
}

// Names in `catalog` that start with `prefix` + "-", for "H100-80GB" -> H100-80GB-SXM / H100-80GB-PCIE.
std::vector<std::string> prefixed_names(const GpuCatalog& catalog, const std::string& prefix) {
  std::vector<std::string> out;
  const std::string p = lower(prefix) + "-";
  for (const std::string& n : catalog.names()) {
    if (lower(n).compare(0, p.size(), p) == 0) out.push_back(n);
  }
  return out;
}

class FakeBackend final : public GpuBackend {
 public:
  FakeBackend(GpuCatalog catalog, const GpuModel* model, Inventory inv)
      : catalog_(std::move(catalog)), model_(model), inv_(std::move(inv)) {}

  Result<Inventory> inventory() override {
    Inventory out = inv_;
    for (GpuInfo& g : out.gpus) {
      const int64_t m = static_cast<size_t>(g.index) < load_.size() ? std::max<int64_t>(0, load_[g.index]) : 0;
      g.utilization_pct = static_cast<int>(std::min<int64_t>(100, m / 10));
      g.memory_used_mib = g.memory_mib * std::min<int64_t>(m, 1000) / 1000;
    }
    return out;
  }

  Status apply_mig_layout(const MigLayout& layout, const std::vector<std::string>& busy_uuids) override {
    if (layout.gpu < 0 || static_cast<size_t>(layout.gpu) >= inv_.gpus.size()) {
      return invalid_argument("MIG layout names GPU " + std::to_string(layout.gpu) + " but this node has GPUs 0.." +
                              std::to_string(inv_.gpus.size() - 1));
    }
    GpuInfo& g = inv_.gpus[layout.gpu];
    auto plan = detail::plan_mig_layout(model_, g, layout, busy_uuids);
    if (!plan.ok()) return plan.error();
    std::vector<MigInstanceInfo> next = plan->keep;
    for (const auto& [p, start] : plan->create) {
      MigInstanceInfo m;
      m.profile = p->name;
      m.start = start;
      m.size = p->memory_slices;
      m.uuid = mig_uuid(g.uuid, p->name, start);
      next.push_back(std::move(m));
    }
    std::sort(next.begin(), next.end(), [](const auto& a, const auto& b) { return a.start < b.start; });
    g.instances = std::move(next);
    return {};
  }

  void set_fake_load(const std::vector<int64_t>& milli_by_gpu) override { load_ = milli_by_gpu; }

 private:
  GpuCatalog catalog_;  // keeps model_ alive (models are shared)
  const GpuModel* model_;
  Inventory inv_;
  std::vector<int64_t> load_;
};

// Parses the mig= value into instances on one GPU of `model`, validated by core's rules.
Result<std::vector<MigInstanceInfo>> parse_mig(const std::string& value, const GpuModel& model) {
  const std::string part = "mig=" + value;
  if (!model.mig_capable()) {
    return invalid_argument("fake GPU spec part '" + part + "': " + model.name +
                            " is not MIG-capable; drop the mig= part or use a MIG-capable model (A100, A30, H100, "
                            "H200)");
  }
  std::vector<MigInstanceInfo> out;
  if (lower(value) == "on") return out;
  if (value.empty()) {
    return invalid_argument("fake GPU spec part 'mig=' is empty; write mig=on or mig=PROFILE@START+..., e.g. "
                            "mig=3g@0+3g@4");
  }
  // '+' separates instances, but "+me" belongs to a profile name ("1g.10gb+me@0").
  std::vector<std::string> items;
  for (const std::string& t : split(value, '+')) {
    if (!items.empty() && items.back().find('@') == std::string::npos && lower(t).compare(0, 2, "me") == 0) {
      items.back() += "+" + t;
    } else {
      items.push_back(t);
    }
  }
  tessera::MigLayout layout(&model);
  for (const std::string& item : items) {
    const std::string where = "fake GPU spec part '" + part + "', instance '" + item + "'";
    const size_t at = item.find('@');
    const std::string name = item.substr(0, at);
    const MigProfile* p = model.find_profile(name);
    if (!p) {
      std::string known;
      for (const MigProfile& q : model.mig_profiles) known += (known.empty() ? "" : ", ") + q.name;
      return invalid_argument(where + ": " + model.name + " has no MIG profile '" + name + "'; its profiles are " +
                              known);
    }
    int start = 0;
    if (at == std::string::npos) {
      // No start: NVIDIA's first-fit order, as `nvidia-smi mig -cgi` without a placement.
      auto s = layout.create_first_fit(*p);
      if (!s.ok()) return Error{s.error().code, where + ": " + s.error().message};
      start = *s;
    } else {
      const std::string st = item.substr(at + 1);
      auto [ptr, ec] = std::from_chars(st.data(), st.data() + st.size(), start);
      if (st.empty() || ec != std::errc() || ptr != st.data() + st.size()) {
        return invalid_argument(where + ": start '" + st + "' is not a number; write PROFILE@START, e.g. " + p->name +
                                "@" + std::to_string(std::countr_zero(p->allowed_starts)));
      }
      if (Status s = layout.create(*p, start); !s.ok()) {
        std::string free;
        for (int f : layout.feasible_starts(*p)) free += (free.empty() ? "" : ",") + std::to_string(f);
        return Error{s.error().code, where + ": " + s.message() + "; fix: " +
                                         (free.empty() ? "no start is free for " + p->name + " in this layout; "
                                                         "remove or move other instances"
                                                       : "use a free allowed start {" + free + "}")};
      }
    }
    MigInstanceInfo m;
    m.profile = p->name;
    m.start = start;
    m.size = p->memory_slices;
    out.push_back(std::move(m));
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.start < b.start; });
  return out;
}

void build_links(Inventory& inv, Topo topo, int nvlinks) {
  const int n = static_cast<int>(inv.gpus.size());
  const int half = (n + 1) / 2;
  inv.links.assign(n, std::vector<GpuLink>(n, GpuLink::kSystem));
  inv.nvlink_count.assign(n, std::vector<int>(n, 0));
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < n; ++j) {
      GpuLink& l = inv.links[i][j];
      const bool same_half = i / half == j / half;
      const bool pair = i / 2 == j / 2;
      if (i == j) {
        l = GpuLink::kSelf;
      } else if (topo == Topo::kNvSwitch) {
        l = GpuLink::kNvSwitch;
        inv.nvlink_count[i][j] = nvlinks;
      } else if (topo == Topo::kNvLink && pair) {
        l = GpuLink::kNvLink;
        inv.nvlink_count[i][j] = 4;
      } else if (topo == Topo::kPcie) {
        l = same_half ? GpuLink::kHostBridge : GpuLink::kSystem;
      } else {  // pcie-pairs, and the non-bridged pairs of nvlink
        l = pair ? GpuLink::kPciSwitch : same_half ? GpuLink::kNuma : GpuLink::kSystem;
      }
    }
  }
}

}  // namespace

Result<std::unique_ptr<GpuBackend>> make_fake_backend(const std::string& spec, const std::string& node_name,
                                                      const GpuCatalog& catalog) {
  const std::string usage =
      "; expected fake:COUNTxMODEL[,nvswitch|nvlink|pcie-pairs|pcie][,mig=on|mig=PROFILE@START+...]"
      ", e.g. fake:8xH100-80GB-SXM,nvswitch,mig=3g.40gb@0+3g.40gb@4";
  if (spec.compare(0, 5, "fake:") != 0) {
    return invalid_argument("fake GPU spec '" + spec + "' does not start with 'fake:'" + usage);
  }
  const std::vector<std::string> parts = split(spec.substr(5), ',');

  // COUNTxMODEL
  const std::string& head = parts[0];
  const size_t x = head.find_first_of("xX");
  int count = 0;
  if (x == std::string::npos || x == 0) {
    return invalid_argument("fake GPU spec part '" + head + "' is not COUNTxMODEL" + usage);
  }
  {
    auto [ptr, ec] = std::from_chars(head.data(), head.data() + x, count);
    if (ec != std::errc() || ptr != head.data() + x || count < 1 || count > 64) {
      return invalid_argument("fake GPU spec part '" + head + "': count '" + head.substr(0, x) +
                              "' must be a number from 1 to 64");
    }
  }
  const std::string model_name = head.substr(x + 1);
  const GpuModel* model = nullptr;
  if (auto m = catalog.find(model_name); m.ok()) {
    model = *m;
  } else {
    const std::vector<std::string> cands = prefixed_names(catalog, model_name);
    if (cands.size() == 1) {
      model = *catalog.find(cands[0]);
    } else if (cands.size() > 1) {
      std::string list;
      for (const std::string& c : cands) list += (list.empty() ? "" : " or ") + c;
      return invalid_argument("fake GPU spec part '" + head + "': model '" + model_name + "' is ambiguous; write " +
                              list);
    } else {
      return invalid_argument("fake GPU spec part '" + head + "': " + m.error().message);
    }
  }

  Topo topo = Topo::kDefault;
  std::string topo_part;
  std::vector<MigInstanceInfo> instances;
  bool mig = false;
  for (size_t i = 1; i < parts.size(); ++i) {
    const std::string& p = parts[i];
    const std::string lp = lower(p);
    Topo t = Topo::kDefault;
    if (lp == "nvswitch") t = Topo::kNvSwitch;
    else if (lp == "nvlink") t = Topo::kNvLink;
    else if (lp == "pcie-pairs") t = Topo::kPciePairs;
    else if (lp == "pcie") t = Topo::kPcie;
    if (t != Topo::kDefault) {
      if (topo != Topo::kDefault) {
        return invalid_argument("fake GPU spec part '" + p + "': topology already given as '" + topo_part +
                                "'; give one of nvswitch, nvlink, pcie-pairs, pcie");
      }
      if ((t == Topo::kNvSwitch || t == Topo::kNvLink) && model->nvlink_generation <= 0) {
        return invalid_argument("fake GPU spec part '" + p + "': " + model->name +
                                " has no NVLink; use pcie-pairs or pcie");
      }
      topo = t;
      topo_part = p;
    } else if (lp.compare(0, 4, "mig=") == 0) {
      if (mig) return invalid_argument("fake GPU spec part '" + p + "': mig= given twice; give it once");
      auto parsed = parse_mig(p.substr(4), *model);
      if (!parsed.ok()) return parsed.error();
      instances = std::move(*parsed);
      mig = true;
    } else {
      return invalid_argument("fake GPU spec part '" + p +
                              "' is unknown; options are nvswitch, nvlink, pcie-pairs, pcie, mig=on, "
                              "mig=PROFILE@START+..." + usage);
    }
  }
  if (topo == Topo::kDefault) topo = model->nvlink_generation > 0 ? Topo::kNvSwitch : Topo::kPcie;

  Inventory inv;
  inv.source = "fake";
  for (int i = 0; i < count; ++i) {
    GpuInfo g;
    g.index = i;
    g.uuid = detail::synthetic_uuid("GPU-fake-", node_name + "/gpu/" + std::to_string(i));
    g.model = model->name;
    g.memory_mib = model->memory.v;
    g.mig_enabled = mig;
    for (MigInstanceInfo m : instances) {
      m.uuid = mig_uuid(g.uuid, m.profile, m.start);
      g.instances.push_back(std::move(m));
    }
    g.utilization_pct = 0;
    g.memory_used_mib = 0;
    inv.gpus.push_back(std::move(g));
  }
  build_links(inv, topo, links_per_gpu(model->nvlink_generation));
  return std::unique_ptr<GpuBackend>(std::make_unique<FakeBackend>(catalog, model, std::move(inv)));
}

}  // namespace tessera::agent
