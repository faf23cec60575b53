// The NVML backend: libnvidia-ml.so.1 loaded with dlopen, no nvml.h and no link-time dependency. Only the
// types and functions used are declared here, with the layouts and values of NVML's API (nvml.h, API
// version 12/13; hardware.md §3.4). Discovery calls only Get* functions: it never changes MIG mode,
// resets a GPU or sets anything. apply_mig_layout destroys and creates GPU and compute instances at
// explicit placements, and only on GPUs already in MIG mode.
#include <dlfcn.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <string>

#include "agent/gpu_internal.h"
#include "agent/gpu_inventory.h"

namespace tessera::agent {
namespace {

// ---- NVML ABI subset ------------------------------------------------------------------------------
using nvmlReturn_t = int;  // an enum in nvml.h (int-sized)
using nvmlDevice_t = struct nvmlDevice_st*;
using nvmlGpuInstance_t = struct nvmlGpuInstance_st*;
using nvmlComputeInstance_t = struct nvmlComputeInstance_st*;

constexpr nvmlReturn_t NVML_SUCCESS = 0;
constexpr unsigned NVML_DEVICE_MIG_ENABLE = 1;
constexpr unsigned NVML_NVLINK_MAX_LINKS = 18;  // NVLink4/5 GPUs have 18; newer headers allow 36
constexpr unsigned NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED = 0;
constexpr unsigned kMaxGiProfileIndex = 32;  // NVML_GPU_INSTANCE_PROFILE_* indices probed (absent ones fail)
constexpr unsigned kMaxCiProfileIndex = 16;  // NVML_COMPUTE_INSTANCE_PROFILE_* indices probed

struct nvmlMemory_t {
  unsigned long long total;  // bytes
  unsigned long long free;
  unsigned long long used;
};
struct nvmlUtilization_t {
  unsigned int gpu;     // percent of time a kernel ran over the past sample period
  unsigned int memory;
};
struct nvmlPciInfo_t {
  char busIdLegacy[16];
  unsigned int domain;
  unsigned int bus;
  unsigned int device;
  unsigned int pciDeviceId;
  unsigned int pciSubSystemId;
  char busId[32];
};
struct nvmlGpuInstancePlacement_t {
  unsigned int start;  // first memory slice
  unsigned int size;   // memory slices
};
struct nvmlGpuInstanceProfileInfo_t {
  unsigned int id;  // the nvidia-smi GI profile id (19, 9, ...)
  unsigned int isP2pSupported;
  unsigned int sliceCount;
  unsigned int instanceCount;
  unsigned int multiprocessorCount;
  unsigned int copyEngineCount;
  unsigned int decoderCount;
  unsigned int encoderCount;
  unsigned int jpegCount;
  unsigned int ofaCount;
  unsigned long long memorySizeMB;
};
struct nvmlGpuInstanceInfo_t {
  nvmlDevice_t device;
  unsigned int id;
  unsigned int profileId;
  nvmlGpuInstancePlacement_t placement;
};
struct nvmlComputeInstanceProfileInfo_t {
  unsigned int id;
  unsigned int sliceCount;
  unsigned int instanceCount;
  unsigned int multiprocessorCount;
  unsigned int sharedCopyEngineCount;
  unsigned int sharedDecoderCount;
  unsigned int sharedEncoderCount;
  unsigned int sharedJpegCount;
  unsigned int sharedOfaCount;
};

// Function table; a null entry is an optional symbol this driver lacks.
struct Nvml {
  void* lib = nullptr;
  nvmlReturn_t (*Init_v2)() = nullptr;
  nvmlReturn_t (*Shutdown)() = nullptr;
  const char* (*ErrorString)(nvmlReturn_t) = nullptr;
  nvmlReturn_t (*SystemGetDriverVersion)(char*, unsigned) = nullptr;
  nvmlReturn_t (*DeviceGetCount_v2)(unsigned*) = nullptr;
  nvmlReturn_t (*DeviceGetHandleByIndex_v2)(unsigned, nvmlDevice_t*) = nullptr;
  nvmlReturn_t (*DeviceGetUUID)(nvmlDevice_t, char*, unsigned) = nullptr;
  nvmlReturn_t (*DeviceGetName)(nvmlDevice_t, char*, unsigned) = nullptr;
  nvmlReturn_t (*DeviceGetMemoryInfo)(nvmlDevice_t, nvmlMemory_t*) = nullptr;
  nvmlReturn_t (*DeviceGetUtilizationRates)(nvmlDevice_t, nvmlUtilization_t*) = nullptr;
  nvmlReturn_t (*DeviceGetPciInfo_v3)(nvmlDevice_t, nvmlPciInfo_t*) = nullptr;
  nvmlReturn_t (*DeviceGetTopologyCommonAncestor)(nvmlDevice_t, nvmlDevice_t, int*) = nullptr;
  nvmlReturn_t (*DeviceGetNvLinkState)(nvmlDevice_t, unsigned, int*) = nullptr;
  nvmlReturn_t (*DeviceGetNvLinkRemotePciInfo_v2)(nvmlDevice_t, unsigned, nvmlPciInfo_t*) = nullptr;
  nvmlReturn_t (*DeviceGetMigMode)(nvmlDevice_t, unsigned*, unsigned*) = nullptr;
  nvmlReturn_t (*DeviceGetMaxMigDeviceCount)(nvmlDevice_t, unsigned*) = nullptr;
  nvmlReturn_t (*DeviceGetMigDeviceHandleByIndex)(nvmlDevice_t, unsigned, nvmlDevice_t*) = nullptr;
  nvmlReturn_t (*DeviceGetGpuInstanceId)(nvmlDevice_t, unsigned*) = nullptr;
  nvmlReturn_t (*DeviceGetComputeInstanceId)(nvmlDevice_t, unsigned*) = nullptr;
  nvmlReturn_t (*DeviceGetGpuInstanceById)(nvmlDevice_t, unsigned, nvmlGpuInstance_t*) = nullptr;
  nvmlReturn_t (*DeviceGetGpuInstanceProfileInfo)(nvmlDevice_t, unsigned, nvmlGpuInstanceProfileInfo_t*) = nullptr;
  nvmlReturn_t (*DeviceGetGpuInstances)(nvmlDevice_t, unsigned, nvmlGpuInstance_t*, unsigned*) = nullptr;
  nvmlReturn_t (*GpuInstanceGetInfo)(nvmlGpuInstance_t, nvmlGpuInstanceInfo_t*) = nullptr;
  nvmlReturn_t (*DeviceCreateGpuInstanceWithPlacement)(nvmlDevice_t, unsigned, const nvmlGpuInstancePlacement_t*,
                                                       nvmlGpuInstance_t*) = nullptr;
  nvmlReturn_t (*GpuInstanceDestroy)(nvmlGpuInstance_t) = nullptr;
  nvmlReturn_t (*GpuInstanceGetComputeInstanceProfileInfo)(nvmlGpuInstance_t, unsigned, unsigned,
                                                           nvmlComputeInstanceProfileInfo_t*) = nullptr;
  nvmlReturn_t (*GpuInstanceGetComputeInstances)(nvmlGpuInstance_t, unsigned, nvmlComputeInstance_t*,
                                                 unsigned*) = nullptr;
  nvmlReturn_t (*GpuInstanceCreateComputeInstance)(nvmlGpuInstance_t, unsigned, nvmlComputeInstance_t*) = nullptr;
  nvmlReturn_t (*ComputeInstanceDestroy)(nvmlComputeInstance_t) = nullptr;

  std::string error(nvmlReturn_t r) const {
    const char* s = ErrorString ? ErrorString(r) : nullptr;
    return (s ? std::string(s) : "NVML error") + " (" + std::to_string(r) + ")";
  }
};

template <class F>
void bind(void* lib, F& fn, const char* name) {
  fn = reinterpret_cast<F>(dlsym(lib, name));
}

Error unavailable(std::string msg) { return {ErrorCode::kUnavailable, std::move(msg)}; }

const char* kNoNvml =
    "; this node has no usable NVIDIA driver, so GPUs cannot be discovered through NVML (declare them instead "
    "with --gpus fake:COUNTxMODEL, or install the driver)";

GpuLink level_to_link(int level) {
  switch (level) {
    case 0:   // NVML_TOPOLOGY_INTERNAL: same board
    case 10:  // SINGLE: PIX
    case 20:  // MULTIPLE: PXB
      return GpuLink::kPciSwitch;
    case 30: return GpuLink::kHostBridge;  // HOSTBRIDGE: PHB
    case 40: return GpuLink::kNuma;        // NODE
    default: return GpuLink::kSystem;      // SYSTEM (50) or unknown
  }
}

bool same_pci(const nvmlPciInfo_t& a, const nvmlPciInfo_t& b) {
  return a.domain == b.domain && a.bus == b.bus && a.device == b.device;
}

class NvmlBackend final : public GpuBackend {
 public:
  NvmlBackend(Nvml nvml, GpuCatalog catalog) : nvml_(nvml), catalog_(std::move(catalog)) {}
  ~NvmlBackend() override {
    if (nvml_.Shutdown) nvml_.Shutdown();
    if (nvml_.lib) dlclose(nvml_.lib);
  }
  NvmlBackend(const NvmlBackend&) = delete;
  NvmlBackend& operator=(const NvmlBackend&) = delete;

  Result<Inventory> inventory() override {
    Inventory inv;
    inv.source = "nvml";
    char buf[96] = {};
    if (nvml_.SystemGetDriverVersion && nvml_.SystemGetDriverVersion(buf, sizeof buf) == NVML_SUCCESS) {
      inv.driver_version = buf;
    }
    auto devs = devices();
    if (!devs.ok()) return devs.error();
    for (unsigned i = 0; i < devs->size(); ++i) {
      auto g = gpu_info(i, (*devs)[i]);
      if (!g.ok()) return g.error();
      inv.gpus.push_back(std::move(*g));
    }
    links(*devs, inv);
    return inv;
  }

  Status apply_mig_layout(const MigLayout& layout, const std::vector<std::string>& busy_uuids) override {
    auto devs = devices();
    if (!devs.ok()) return devs.error();
    if (layout.gpu < 0 || static_cast<size_t>(layout.gpu) >= devs->size()) {
      return invalid_argument("MIG layout names GPU " + std::to_string(layout.gpu) + " but NVML reports " +
                              std::to_string(devs->size()) + " GPUs");
    }
    if (!nvml_.DeviceCreateGpuInstanceWithPlacement || !nvml_.GpuInstanceDestroy || !nvml_.DeviceGetGpuInstanceById ||
        !nvml_.GpuInstanceCreateComputeInstance || !nvml_.GpuInstanceGetComputeInstanceProfileInfo ||
        !nvml_.GpuInstanceGetComputeInstances || !nvml_.ComputeInstanceDestroy) {
      return failed_precondition("this NVIDIA driver's NVML lacks the MIG instance API; upgrade the driver");
    }
    nvmlDevice_t dev = (*devs)[layout.gpu];
    auto current = gpu_info(static_cast<unsigned>(layout.gpu), dev);
    if (!current.ok()) return current.error();
    const GpuModel* model = detail::match_model(catalog_, current->nvml_name);
    auto plan = detail::plan_mig_layout(model, *current, layout, busy_uuids);
    if (!plan.ok()) return plan.error();
    const std::string gpu = "GPU " + std::to_string(layout.gpu);
    for (const MigInstanceInfo& m : plan->destroy) {
      if (Status s = destroy_gpu_instance(dev, m); !s.ok()) {
        return Error{s.error().code, gpu + ": destroying " + m.profile + "@" + std::to_string(m.start) + ": " +
                                         s.message()};
      }
    }
    for (const auto& [p, start] : plan->create) {
      if (Status s = create_instance(dev, *p, start); !s.ok()) {
        return Error{s.error().code, gpu + ": creating " + p->name + "@" + std::to_string(start) + ": " + s.message()};
      }
    }
    return {};
  }

 private:
  Result<std::vector<nvmlDevice_t>> devices() const {
    unsigned n = 0;
    if (nvmlReturn_t r = nvml_.DeviceGetCount_v2(&n); r != NVML_SUCCESS) {
      return unavailable("NVML: cannot count GPUs: " + nvml_.error(r));
    }
    std::vector<nvmlDevice_t> out(n, nullptr);
    for (unsigned i = 0; i < n; ++i) {
      if (nvmlReturn_t r = nvml_.DeviceGetHandleByIndex_v2(i, &out[i]); r != NVML_SUCCESS) {
        return unavailable("NVML: cannot open GPU " + std::to_string(i) + ": " + nvml_.error(r));
      }
    }
    return out;
  }

  Result<GpuInfo> gpu_info(unsigned index, nvmlDevice_t dev) const {
    GpuInfo g;
    g.index = static_cast<int>(index);
    char buf[96] = {};
    if (nvmlReturn_t r = nvml_.DeviceGetUUID(dev, buf, sizeof buf); r != NVML_SUCCESS) {
      return unavailable("NVML: GPU " + std::to_string(index) + " has no UUID: " + nvml_.error(r));
    }
    g.uuid = buf;
    std::memset(buf, 0, sizeof buf);
    if (nvml_.DeviceGetName(dev, buf, sizeof buf) == NVML_SUCCESS) g.nvml_name = buf;
    const GpuModel* model = detail::match_model(catalog_, g.nvml_name);
    g.model = model ? model->name : g.nvml_name;
    nvmlMemory_t mem{};
    if (nvml_.DeviceGetMemoryInfo(dev, &mem) == NVML_SUCCESS) {
      g.memory_mib = static_cast<int64_t>(mem.total >> 20);
      g.memory_used_mib = static_cast<int64_t>(mem.used >> 20);
    }
    nvmlUtilization_t util{};
    // Not supported on MIG-enabled GPUs (NVML returns an error): stays -1 = unknown.
    if (nvml_.DeviceGetUtilizationRates && nvml_.DeviceGetUtilizationRates(dev, &util) == NVML_SUCCESS) {
      g.utilization_pct = static_cast<int>(std::min(util.gpu, 100u));
    }
    unsigned current = 0, pending = 0;
    if (nvml_.DeviceGetMigMode && nvml_.DeviceGetMigMode(dev, &current, &pending) == NVML_SUCCESS) {
      g.mig_enabled = current == NVML_DEVICE_MIG_ENABLE;
    }
    if (g.mig_enabled) g.instances = mig_instances(dev, model);
    return g;
  }

  // GPU instances (by enumerating GI profiles) joined with MIG devices (GI + CI, uuid, memory). Any
  // missing optional symbol or failing call just leaves that part out.
  std::vector<MigInstanceInfo> mig_instances(nvmlDevice_t dev, const GpuModel* model) const {
    std::map<unsigned, MigInstanceInfo> by_gi;  // GI id -> instance
    auto add_gi = [&](nvmlGpuInstance_t gi) {
      nvmlGpuInstanceInfo_t info{};
      if (!nvml_.GpuInstanceGetInfo || nvml_.GpuInstanceGetInfo(gi, &info) != NVML_SUCCESS) return;
      MigInstanceInfo& m = by_gi[info.id];
      m.profile = detail::profile_name(model, static_cast<int>(info.profileId));
      m.start = static_cast<int>(info.placement.start);
      m.size = static_cast<int>(info.placement.size);
      m.gpu_instance_id = static_cast<int>(info.id);
    };
    if (nvml_.DeviceGetGpuInstanceProfileInfo && nvml_.DeviceGetGpuInstances) {
      std::vector<unsigned> seen;
      for (unsigned idx = 0; idx < kMaxGiProfileIndex; ++idx) {
        nvmlGpuInstanceProfileInfo_t pi{};
        if (nvml_.DeviceGetGpuInstanceProfileInfo(dev, idx, &pi) != NVML_SUCCESS) continue;
        if (std::find(seen.begin(), seen.end(), pi.id) != seen.end()) continue;
        seen.push_back(pi.id);
        nvmlGpuInstance_t gis[8] = {};
        unsigned count = 0;
        if (nvml_.DeviceGetGpuInstances(dev, pi.id, gis, &count) != NVML_SUCCESS) continue;
        for (unsigned k = 0; k < count && k < 8; ++k) add_gi(gis[k]);
      }
    }
    unsigned max = 0;
    if (nvml_.DeviceGetMaxMigDeviceCount && nvml_.DeviceGetMigDeviceHandleByIndex && nvml_.DeviceGetGpuInstanceId &&
        nvml_.DeviceGetMaxMigDeviceCount(dev, &max) == NVML_SUCCESS) {
      for (unsigned i = 0; i < max; ++i) {
        nvmlDevice_t mig = nullptr;
        unsigned gi_id = 0, ci_id = 0;
        if (nvml_.DeviceGetMigDeviceHandleByIndex(dev, i, &mig) != NVML_SUCCESS) continue;
        if (nvml_.DeviceGetGpuInstanceId(mig, &gi_id) != NVML_SUCCESS) continue;
        if (!by_gi.count(gi_id) && nvml_.DeviceGetGpuInstanceById) {
          nvmlGpuInstance_t gi = nullptr;
          if (nvml_.DeviceGetGpuInstanceById(dev, gi_id, &gi) == NVML_SUCCESS) add_gi(gi);
        }
        auto it = by_gi.find(gi_id);
        if (it == by_gi.end() || !it->second.uuid.empty()) continue;  // unknown GI, or a second CI
        MigInstanceInfo& m = it->second;
        char buf[96] = {};
        if (nvml_.DeviceGetUUID(mig, buf, sizeof buf) == NVML_SUCCESS) m.uuid = buf;
        if (nvml_.DeviceGetComputeInstanceId && nvml_.DeviceGetComputeInstanceId(mig, &ci_id) == NVML_SUCCESS) {
          m.compute_instance_id = static_cast<int>(ci_id);
        }
        nvmlMemory_t mem{};
        if (nvml_.DeviceGetMemoryInfo(mig, &mem) == NVML_SUCCESS) {
          m.memory_used_mib = static_cast<int64_t>(mem.used >> 20);
        }
      }
    }
    std::vector<MigInstanceInfo> out;
    for (auto& [id, m] : by_gi) out.push_back(std::move(m));
    std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.start < b.start; });
    return out;
  }

  // PCIe level per pair, then NVLink: active links whose remote PCI address is another GPU count as
  // direct links (kNvLink); links to anything else are NVSwitch ports, and two GPUs both on switches
  // reach each other through them (kNvSwitch, NV<min of their switch links>).
  void links(const std::vector<nvmlDevice_t>& devs, Inventory& inv) const {
    const size_t n = devs.size();
    inv.links.assign(n, std::vector<GpuLink>(n, GpuLink::kSystem));
    inv.nvlink_count.assign(n, std::vector<int>(n, 0));
    for (size_t i = 0; i < n; ++i) {
      inv.links[i][i] = GpuLink::kSelf;
      for (size_t j = i + 1; j < n; ++j) {
        int level = 50;
        if (nvml_.DeviceGetTopologyCommonAncestor &&
            nvml_.DeviceGetTopologyCommonAncestor(devs[i], devs[j], &level) != NVML_SUCCESS) {
          level = 50;
        }
        inv.links[i][j] = inv.links[j][i] = level_to_link(level);
      }
    }
    if (!nvml_.DeviceGetPciInfo_v3 || !nvml_.DeviceGetNvLinkState || !nvml_.DeviceGetNvLinkRemotePciInfo_v2) return;
    std::vector<nvmlPciInfo_t> pci(n);
    std::vector<bool> has_pci(n, false);
    for (size_t i = 0; i < n; ++i) has_pci[i] = nvml_.DeviceGetPciInfo_v3(devs[i], &pci[i]) == NVML_SUCCESS;
    std::vector<int> switch_links(n, 0);
    for (size_t i = 0; i < n; ++i) {
      for (unsigned link = 0; link < NVML_NVLINK_MAX_LINKS; ++link) {
        int active = 0;
        if (nvml_.DeviceGetNvLinkState(devs[i], link, &active) != NVML_SUCCESS || active == 0) continue;
        nvmlPciInfo_t remote{};
        if (nvml_.DeviceGetNvLinkRemotePciInfo_v2(devs[i], link, &remote) != NVML_SUCCESS) continue;
        bool to_gpu = false;
        for (size_t j = 0; j < n; ++j) {
          if (j != i && has_pci[j] && same_pci(remote, pci[j])) {
            ++inv.nvlink_count[i][j];
            to_gpu = true;
            break;
          }
        }
        if (!to_gpu) ++switch_links[i];
      }
    }
    for (size_t i = 0; i < n; ++i) {
      for (size_t j = 0; j < n; ++j) {
        if (i == j) continue;
        if (inv.nvlink_count[i][j] > 0) {
          inv.links[i][j] = GpuLink::kNvLink;
        } else if (switch_links[i] > 0 && switch_links[j] > 0) {
          inv.links[i][j] = GpuLink::kNvSwitch;
          inv.nvlink_count[i][j] = std::min(switch_links[i], switch_links[j]);
        }
      }
    }
  }

  Status check(nvmlReturn_t r, const std::string& what) const {
    if (r == NVML_SUCCESS) return {};
    return failed_precondition(what + " failed: " + nvml_.error(r));
  }

  // Destroys the compute instances of the GI, then the GI. NVML refuses (IN_USE) when processes run on it.
  Status destroy_gpu_instance(nvmlDevice_t dev, const MigInstanceInfo& m) const {
    if (m.gpu_instance_id < 0) return internal_error("instance has no GPU instance id");
    nvmlGpuInstance_t gi = nullptr;
    if (Status s = check(nvml_.DeviceGetGpuInstanceById(dev, static_cast<unsigned>(m.gpu_instance_id), &gi),
                         "nvmlDeviceGetGpuInstanceById");
        !s.ok()) {
      return s;
    }
    std::vector<unsigned> seen;
    for (unsigned idx = 0; idx < kMaxCiProfileIndex; ++idx) {
      nvmlComputeInstanceProfileInfo_t ci{};
      if (nvml_.GpuInstanceGetComputeInstanceProfileInfo(gi, idx, NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED, &ci) !=
          NVML_SUCCESS) {
        continue;
      }
      if (std::find(seen.begin(), seen.end(), ci.id) != seen.end()) continue;
      seen.push_back(ci.id);
      nvmlComputeInstance_t cis[8] = {};
      unsigned count = 0;
      if (nvml_.GpuInstanceGetComputeInstances(gi, ci.id, cis, &count) != NVML_SUCCESS) continue;
      for (unsigned k = 0; k < count && k < 8; ++k) {
        if (Status s = check(nvml_.ComputeInstanceDestroy(cis[k]), "nvmlComputeInstanceDestroy"); !s.ok()) return s;
      }
    }
    return check(nvml_.GpuInstanceDestroy(gi), "nvmlGpuInstanceDestroy");
  }

  // Creates the GI at its explicit placement and one compute instance covering all of it; on a
  // compute-instance failure the new GI is destroyed again.
  Status create_instance(nvmlDevice_t dev, const MigProfile& p, int start) const {
    const nvmlGpuInstancePlacement_t placement{static_cast<unsigned>(start), static_cast<unsigned>(p.memory_slices)};
    nvmlGpuInstance_t gi = nullptr;
    if (Status s = check(nvml_.DeviceCreateGpuInstanceWithPlacement(dev, static_cast<unsigned>(p.id), &placement, &gi),
                         "nvmlDeviceCreateGpuInstanceWithPlacement");
        !s.ok()) {
      return s;
    }
    // The full-size compute instance profile: the one with the most compute slices.
    nvmlComputeInstanceProfileInfo_t best{};
    bool found = false;
    for (unsigned idx = 0; idx < kMaxCiProfileIndex; ++idx) {
      nvmlComputeInstanceProfileInfo_t ci{};
      if (nvml_.GpuInstanceGetComputeInstanceProfileInfo(gi, idx, NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED, &ci) !=
          NVML_SUCCESS) {
        continue;
      }
      if (!found || ci.sliceCount > best.sliceCount) best = ci;
      found = true;
    }
    Status s = found ? Status() : failed_precondition("no compute instance profile for the new GPU instance");
    if (s.ok()) {
      nvmlComputeInstance_t ci = nullptr;
      s = check(nvml_.GpuInstanceCreateComputeInstance(gi, best.id, &ci), "nvmlGpuInstanceCreateComputeInstance");
    }
    if (!s.ok()) (void)nvml_.GpuInstanceDestroy(gi);
    return s;
  }

  Nvml nvml_;
  GpuCatalog catalog_;
};

}  // namespace

Result<std::unique_ptr<GpuBackend>> make_nvml_backend(const GpuCatalog& catalog) {
  Nvml n;
  n.lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!n.lib) {
    const char* e = dlerror();
    return unavailable(std::string("NVML unavailable: cannot load libnvidia-ml.so.1 (") + (e ? e : "not found") + ")" +
                       kNoNvml);
  }
  bind(n.lib, n.Init_v2, "nvmlInit_v2");
  bind(n.lib, n.Shutdown, "nvmlShutdown");
  bind(n.lib, n.ErrorString, "nvmlErrorString");
  bind(n.lib, n.SystemGetDriverVersion, "nvmlSystemGetDriverVersion");
  bind(n.lib, n.DeviceGetCount_v2, "nvmlDeviceGetCount_v2");
  bind(n.lib, n.DeviceGetHandleByIndex_v2, "nvmlDeviceGetHandleByIndex_v2");
  bind(n.lib, n.DeviceGetUUID, "nvmlDeviceGetUUID");
  bind(n.lib, n.DeviceGetName, "nvmlDeviceGetName");
  bind(n.lib, n.DeviceGetMemoryInfo, "nvmlDeviceGetMemoryInfo");
  bind(n.lib, n.DeviceGetUtilizationRates, "nvmlDeviceGetUtilizationRates");
  bind(n.lib, n.DeviceGetPciInfo_v3, "nvmlDeviceGetPciInfo_v3");
  bind(n.lib, n.DeviceGetTopologyCommonAncestor, "nvmlDeviceGetTopologyCommonAncestor");
  bind(n.lib, n.DeviceGetNvLinkState, "nvmlDeviceGetNvLinkState");
  bind(n.lib, n.DeviceGetNvLinkRemotePciInfo_v2, "nvmlDeviceGetNvLinkRemotePciInfo_v2");
  bind(n.lib, n.DeviceGetMigMode, "nvmlDeviceGetMigMode");
  bind(n.lib, n.DeviceGetMaxMigDeviceCount, "nvmlDeviceGetMaxMigDeviceCount");
  bind(n.lib, n.DeviceGetMigDeviceHandleByIndex, "nvmlDeviceGetMigDeviceHandleByIndex");
  bind(n.lib, n.DeviceGetGpuInstanceId, "nvmlDeviceGetGpuInstanceId");
  bind(n.lib, n.DeviceGetComputeInstanceId, "nvmlDeviceGetComputeInstanceId");
  bind(n.lib, n.DeviceGetGpuInstanceById, "nvmlDeviceGetGpuInstanceById");
  bind(n.lib, n.DeviceGetGpuInstanceProfileInfo, "nvmlDeviceGetGpuInstanceProfileInfo");
  bind(n.lib, n.DeviceGetGpuInstances, "nvmlDeviceGetGpuInstances");
  bind(n.lib, n.GpuInstanceGetInfo, "nvmlGpuInstanceGetInfo");
  bind(n.lib, n.DeviceCreateGpuInstanceWithPlacement, "nvmlDeviceCreateGpuInstanceWithPlacement");
  bind(n.lib, n.GpuInstanceDestroy, "nvmlGpuInstanceDestroy");
  bind(n.lib, n.GpuInstanceGetComputeInstanceProfileInfo, "nvmlGpuInstanceGetComputeInstanceProfileInfo");
  bind(n.lib, n.GpuInstanceGetComputeInstances, "nvmlGpuInstanceGetComputeInstances");
  bind(n.lib, n.GpuInstanceCreateComputeInstance, "nvmlGpuInstanceCreateComputeInstance");
  bind(n.lib, n.ComputeInstanceDestroy, "nvmlComputeInstanceDestroy");

  if (!n.Init_v2 || !n.Shutdown || !n.DeviceGetCount_v2 || !n.DeviceGetHandleByIndex_v2 || !n.DeviceGetUUID ||
      !n.DeviceGetName || !n.DeviceGetMemoryInfo) {
    dlclose(n.lib);
    return unavailable("NVML unavailable: libnvidia-ml.so.1 lacks the basic device functions (driver too old)" +
                       std::string(kNoNvml));
  }
  if (nvmlReturn_t r = n.Init_v2(); r != NVML_SUCCESS) {
    const std::string msg = "NVML unavailable: nvmlInit_v2 failed: " + n.error(r) + kNoNvml;
    dlclose(n.lib);
    return unavailable(msg);
  }
  unsigned count = 0;
  if (nvmlReturn_t r = n.DeviceGetCount_v2(&count); r != NVML_SUCCESS || count == 0) {
    const std::string msg = r != NVML_SUCCESS ? "NVML unavailable: nvmlDeviceGetCount_v2 failed: " + n.error(r)
                                              : std::string("NVML found no GPU on this node");
    n.Shutdown();
    dlclose(n.lib);
    return unavailable(msg + kNoNvml);
  }
  return std::unique_ptr<GpuBackend>(std::make_unique<NvmlBackend>(n, catalog));
}

}  // namespace tessera::agent
