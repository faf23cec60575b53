// Built-in GPU models and catalog lookup. Sources: ../shared/reference/hardware.md §1.2 (profile tables),
// §6 (placements), §3.3 (NVLink). MIG memory is nvidia-smi's `-lgip` GiB figure converted to MiB
// (x 1024, exact for the quarter-GiB values it prints).
#include "core/gpu_catalog.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <set>
#include <utility>

namespace tessera {
namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

constexpr int64_t kGiB = 1024;  // MiB per GiB

// Scales an H100-80GB figure to a bigger part of the same die, rounded down to 256 MiB [derived].
int64_t scaled(int64_t mib, int64_t num, int64_t den) { return mib * num / den / 256 * 256; }

// The A100/H100-style table on the 8-slice axis (hardware.md §6), in `nvidia-smi -lgip` order.
// gb: name labels of the 1-, 2-, 4- and 8-slice profiles; mem: their memory in MiB (shared by the
// profiles of that size); sms: per profile in the order 1g, 1g+me, 1g double-memory, 2g, 3g, 4g, 7g.
std::vector<MigProfile> mig8(const char* const (&gb)[4], const int64_t (&mem)[4], const int (&sms)[7]) {
  struct Row {
    int id, compute, mem_slices;
    uint8_t starts;
    int max;
    bool me;
    int gb_index;
  };
  static constexpr Row kRows[7] = {
      {19, 1, 1, 0x7F, 7, false, 0},                                 // starts {0..6}: never 7
      {20, 1, 1, 0x7F, 1, true, 0},  {15, 1, 2, 0x55, 4, false, 1},  // {0,2,4,6}
      {14, 2, 2, 0x15, 3, false, 1},                                 // {0,2,4}
      {9, 3, 4, 0x11, 2, false, 2},                                  // {0,4}
      {5, 4, 4, 0x01, 1, false, 2},                                  // {0}
      {0, 7, 8, 0x01, 1, false, 3},                                  // {0}, whole axis
  };
  std::vector<MigProfile> out;
  for (int i = 0; i < 7; ++i) {
    const Row& r = kRows[i];
    MigProfile p;
    p.id = r.id;
    p.name = std::to_string(r.compute) + "g." + gb[r.gb_index] + "gb" + (r.me ? "+me" : "");
    p.compute_slices = r.compute;
    p.memory_slices = r.mem_slices;
    p.allowed_starts = r.starts;
    p.max_instances = r.max;
    p.media_extension = r.me;
    p.memory = MiB(mem[r.gb_index]);
    p.sms = sms[i];
    out.push_back(std::move(p));
  }
  return out;
}

GpuModel plain(std::string name, std::vector<std::string> aliases, int64_t mem_gib, int sms, int nvlink) {
  GpuModel m;
  m.name = std::move(name);
  m.aliases = std::move(aliases);
  m.memory = MiB(mem_gib * kGiB);
  m.sms = sms;
  m.nvlink_generation = nvlink;
  return m;
}

GpuModel mig(GpuModel m, std::vector<MigProfile> profiles) {
  m.memory_slices = profiles.back().memory_slices;  // the last row is the whole-GPU profile
  m.compute_slices = profiles.back().compute_slices;
  m.mig_profiles = std::move(profiles);
  return m;
}

GpuCatalog make_builtin() {
  // Whole-GPU memory is the nominal capacity (GB x 1024 MiB); nvidia-smi may report a little less
  // (H100 80GB HBM3: 81559 MiB, T4: 15360 MiB). SMs are the full GPU's, not the MIG-mode 98/132.
  std::vector<GpuModel> models;

  // A100 (SXM4 and PCIe): NVLink3 (NVSwitch on SXM4, bridges on PCIe). 108 SMs, 98 usable in MIG.
  // A100-40GB 2- and 4-slice sizes print 9.75 / 19.62 GiB (19.50 / 9.62 on some drivers): we use
  // 9.75 GiB = 9984 and 19.625 GiB = 20096. 7g: 39.25 GiB = 40192 (39.50 on some drivers).
  models.push_back(
      mig(plain("A100-40GB",
                {"A100-SXM4-40GB", "NVIDIA A100-SXM4-40GB", "A100-PCIE-40GB", "NVIDIA A100-PCIE-40GB"}, 40,
                108, 3),
          mig8({"5", "10", "20", "40"}, {4864, 9984, 20096, 40192}, {14, 14, 14, 28, 42, 56, 98})));
  // A100-80GB: same geometry; -lgip prints 9.50 / 19.50 / 39.25 / 79.25 GiB.
  models.push_back(
      mig(plain("A100-80GB",
                {"A100-SXM4-80GB", "NVIDIA A100-SXM4-80GB", "A100-PCIE-80GB", "NVIDIA A100-PCIE-80GB",
                 "NVIDIA A100 80GB PCIe"},
                80, 108, 3),
          mig8({"10", "20", "40", "80"}, {9728, 19968, 40192, 81152}, {14, 14, 14, 28, 42, 56, 98})));

  // A30: 4 memory x 4 compute slices; NVLink3 bridge. 1g.6gb memory ~5.8 GiB [unverified]: 5.8125 GiB.
  {
    GpuModel a30 = plain("A30", {"A30-24GB", "NVIDIA A30"}, 24, 56, 3);
    auto row = [](int id, std::string name, int c, int ms, uint8_t starts, int max, bool me, int64_t mem,
                  int sms) { return MigProfile{id, std::move(name), c, ms, starts, max, me, MiB(mem), sms}; };
    models.push_back(mig(std::move(a30), {row(14, "1g.6gb", 1, 1, 0x0F, 4, false, 5952, 14),
                                          row(21, "1g.6gb+me", 1, 1, 0x0F, 1, true, 5952, 14),
                                          row(5, "2g.12gb", 2, 2, 0x05, 2, false, 11968, 28),  // 11.69 GiB
                                          row(6, "2g.12gb+me", 2, 2, 0x05, 1, true, 11968, 28),
                                          row(0, "4g.24gb", 4, 4, 0x01, 1, false, 24064, 56)}));  // 23.50 GiB
  }

  // H100-80GB: 9.75 / 19.62 / 39.50 / 79.25 GiB on both; SM counts differ (SXM5 132, PCIe 114).
  // NVLink4: NVSwitch on SXM5, bridges on PCIe.
  const int64_t h100_mem[4] = {9984, 20096, 40448, 81152};
  models.push_back(
      mig(plain("H100-80GB-SXM", {"H100-SXM5-80GB", "H100-SXM", "NVIDIA H100 80GB HBM3", "H100 80GB HBM3"},
                80, 132, 4),
          mig8({"10", "20", "40", "80"}, h100_mem, {16, 16, 26, 32, 60, 64, 132})));
  models.push_back(mig(plain("H100-80GB-PCIE", {"H100-PCIE", "NVIDIA H100 PCIe", "H100 PCIe"}, 80, 114, 4),
                       mig8({"10", "20", "40", "80"}, h100_mem, {14, 14, 14, 30, 46, 62, 114})));

  // H100 NVL (94 GB): placements as A100/H100 [3p]. Memory scaled from H100-80GB by 94/80 and SMs taken
  // from SXM5 (same 132-SM die) [derived, unverified]. NVLink4 bridges.
  {
    int64_t mem[4];
    for (int i = 0; i < 4; ++i) mem[i] = scaled(h100_mem[i], 94, 80);
    models.push_back(mig(plain("H100-NVL", {"H100-94GB", "NVIDIA H100 NVL", "H100 NVL"}, 94, 132, 4),
                         mig8({"12", "24", "47", "94"}, mem, {16, 16, 26, 32, 60, 64, 132})));
  }

  // H200-141GB (SXM5 and NVL). Placements are the H100 structure: expected, [unverified] in hardware.md
  // §1.2. 1g.18gb = 16.00 GiB [3p]; the bigger sizes scale H100-80GB by 141/80 [derived, unverified].
  // SMs as H100 SXM5 (same die; 1g = 16 SMs confirmed [3p]).
  {
    int64_t mem[4] = {16 * kGiB, 0, 0, 0};
    for (int i = 1; i < 4; ++i) mem[i] = scaled(h100_mem[i], 141, 80);
    models.push_back(
        mig(plain("H200-141GB", {"H200", "NVIDIA H200", "H200-NVL", "NVIDIA H200 NVL"}, 141, 132, 4),
            mig8({"18", "35", "71", "141"}, mem, {16, 16, 26, 32, 60, 64, 132})));
  }

  // Not MIG-capable: whole or fractional GPUs only.
  // V100 SXM2: NVLink2. "V100" is the 16 GB part in the Alibaba PAI trace, "V100M32" the 32 GB one.
  models.push_back(
      plain("V100-16GB", {"V100M16", "V100", "Tesla V100-SXM2-16GB", "Tesla V100-PCIE-16GB"}, 16, 80, 2));
  models.push_back(
      plain("V100-32GB", {"V100M32", "Tesla V100-SXM2-32GB", "Tesla V100-PCIE-32GB"}, 32, 80, 2));
  models.push_back(plain("T4", {"Tesla T4", "NVIDIA T4"}, 16, 40, 0));
  // P100 PCIe 16 GB (the cloud part in the Alibaba trace): no NVLink. An SXM2 P100 (NVLink1) can be
  // declared in config.
  models.push_back(plain("P100", {"P100-16GB", "Tesla P100-PCIE-16GB"}, 16, 56, 0));
  models.push_back(plain("A10", {"NVIDIA A10"}, 24, 72, 0));
  models.push_back(plain("L4", {"NVIDIA L4"}, 24, 58, 0));
  models.push_back(plain("L40S", {"NVIDIA L40S"}, 48, 142, 0));
  // Opaque GPU types of the Alibaba trace: memory, SMs and NVLink are unknown, so 0.
  for (const char* g : {"G1", "G2", "G3"}) models.push_back(plain(g, {}, 0, 0, 0));

  GpuCatalog catalog;
  for (GpuModel& m : models) {
    if (!catalog.add(std::move(m)).ok()) std::abort();  // a broken built-in table is a programming error
  }
  return catalog;
}

}  // namespace

std::string slice_set_string(uint8_t mask) {
  std::string s = "{";
  for (int i = 0; i < 8; ++i) {
    if (!(mask >> i & 1)) continue;
    if (s.size() > 1) s += ',';
    s += std::to_string(i);
  }
  return s + "}";
}

const MigProfile* GpuModel::find_profile(std::string_view name_or_short) const {
  for (const MigProfile& p : mig_profiles) {  // fast path: exact spelling, no allocation
    if (p.name == name_or_short) return &p;
  }
  if (name_or_short.size() == 2 && name_or_short[1] == 'g' && name_or_short[0] >= '1' && name_or_short[0] <= '9') {
    const MigProfile* best = nullptr;  // short form, see below
    for (const MigProfile& p : mig_profiles) {
      if (p.media_extension || p.compute_slices != name_or_short[0] - '0') continue;
      if (!best || p.memory_slices < best->memory_slices) best = &p;
    }
    return best;
  }
  const std::string want = lower(trim(name_or_short));
  for (const MigProfile& p : mig_profiles) {
    if (lower(p.name) == want) return &p;
  }
  // Short form "Ng": the non-+me profile with N compute slices and the fewest memory slices.
  if (want.size() < 2 || want.back() != 'g') return nullptr;
  int n = 0;
  for (size_t i = 0; i + 1 < want.size(); ++i) {
    if (!std::isdigit(static_cast<unsigned char>(want[i])) || n > 100) return nullptr;
    n = n * 10 + (want[i] - '0');
  }
  const MigProfile* best = nullptr;
  for (const MigProfile& p : mig_profiles) {
    if (p.media_extension || p.compute_slices != n) continue;
    if (!best || p.memory_slices < best->memory_slices) best = &p;
  }
  return best;
}

const MigProfile* GpuModel::find_profile_id(int id) const {
  for (const MigProfile& p : mig_profiles) {
    if (p.id == id) return &p;
  }
  return nullptr;
}

const GpuCatalog& GpuCatalog::builtin() {
  static const GpuCatalog catalog = make_builtin();
  return catalog;
}

namespace {

// Validates one model on its own (names across models are checked by add()).
Status validate(const GpuModel& m) {
  const std::string where = "GPU model \"" + m.name + "\": ";
  if (trim(m.name).empty()) return invalid_argument("GPU model name must not be empty");
  if (m.memory < MiB(0) || m.sms < 0 || m.nvlink_generation < 0) {
    return invalid_argument(where + "memory, sms and nvlink_generation must not be negative");
  }
  if (m.memory_slices != 0 && m.memory_slices != 4 && m.memory_slices != 8) {
    return invalid_argument(where + "memory_slices must be 0 (not MIG-capable), 4 (A30-like) or 8, got " +
                            std::to_string(m.memory_slices));
  }
  if (m.memory_slices == 0) {
    if (m.compute_slices != 0 || !m.mig_profiles.empty()) {
      return invalid_argument(where + "compute_slices and mig_profiles need memory_slices 4 or 8");
    }
    return {};
  }
  if (m.compute_slices < 1 || m.compute_slices > m.memory_slices) {
    return invalid_argument(where + "compute_slices must be in 1.." + std::to_string(m.memory_slices) +
                            ", got " + std::to_string(m.compute_slices));
  }
  if (m.mig_profiles.empty()) return invalid_argument(where + "a MIG-capable model needs mig_profiles");
  std::set<int> ids;
  std::set<std::string> names;
  for (const MigProfile& p : m.mig_profiles) {
    const std::string pw = where + "MIG profile \"" + p.name + "\" (id " + std::to_string(p.id) + "): ";
    if (trim(p.name).empty()) return invalid_argument(where + "a MIG profile has an empty name");
    if (!ids.insert(p.id).second) return invalid_argument(pw + "duplicate profile id");
    if (!names.insert(lower(p.name)).second) return invalid_argument(pw + "duplicate profile name");
    if (p.compute_slices < 1 || p.compute_slices > m.compute_slices) {
      return invalid_argument(pw + "compute_slices must be in 1.." + std::to_string(m.compute_slices));
    }
    if (p.memory_slices < 1 || p.memory_slices > m.memory_slices) {
      return invalid_argument(pw + "memory_slices must be in 1.." + std::to_string(m.memory_slices));
    }
    if (p.allowed_starts == 0) return invalid_argument(pw + "allowed_starts is empty");
    for (int s = 0; s < 8; ++s) {
      if ((p.allowed_starts >> s & 1) && s + p.memory_slices > m.memory_slices) {
        return invalid_argument(pw + "start " + std::to_string(s) + " + size " +
                                std::to_string(p.memory_slices) + " runs past the " +
                                std::to_string(m.memory_slices) + "-slice memory axis");
      }
    }
    if (p.max_instances < 1) return invalid_argument(pw + "max_instances must be at least 1");
    if (p.memory < MiB(0) || p.memory > m.memory || p.sms < 0 || p.sms > m.sms) {
      return invalid_argument(pw + "memory and sms must be in 0..the model's");
    }
  }
  return {};
}

}  // namespace

Status GpuCatalog::add(GpuModel model) {
  if (Status s = validate(model); !s.ok()) return s;
  std::set<std::string> own;  // this model's spellings, lower-cased
  std::vector<std::string> spellings{model.name};
  spellings.insert(spellings.end(), model.aliases.begin(), model.aliases.end());
  for (const std::string& raw : spellings) {
    const std::string key = lower(trim(raw));
    if (key.empty()) return invalid_argument("GPU model \"" + model.name + "\": an alias is empty");
    if (!own.insert(key).second) {
      return invalid_argument("GPU model \"" + model.name + "\": \"" + raw + "\" is listed twice");
    }
    if (auto hit = find(key); hit.ok()) {
      return invalid_argument("GPU model \"" + model.name + "\": \"" + raw +
                              "\" is already known as model \"" + (*hit)->name + "\"");
    }
  }
  models_.push_back(std::make_shared<const GpuModel>(std::move(model)));
  return {};
}

Result<const GpuModel*> GpuCatalog::find(std::string_view name) const {
  const std::string want = lower(trim(name));
  for (const auto& m : models_) {
    if (lower(m->name) == want) return m.get();
    for (const std::string& a : m->aliases) {
      if (lower(trim(a)) == want) return m.get();
    }
  }
  std::string known;
  for (const std::string& n : names()) known += (known.empty() ? "" : ", ") + n;
  return not_found("unknown GPU model \"" + std::string(name) + "\"; known models: " + known +
                   "; declare it under gpu_models in the cluster config");
}

std::vector<std::string> GpuCatalog::names() const {
  std::vector<std::string> out;
  for (const auto& m : models_) out.push_back(m->name);
  std::sort(out.begin(), out.end());
  return out;
}

Result<GpuCatalog> GpuCatalog::with_extra(std::vector<GpuModel> extra) {
  GpuCatalog catalog = builtin();  // shares the immutable built-in models
  for (GpuModel& m : extra) {
    if (Status s = catalog.add(std::move(m)); !s.ok()) return s.error();
  }
  return catalog;
}

}  // namespace tessera
