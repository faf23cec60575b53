// What GPUs a node has, as the agent found them: through NVML on a machine with NVIDIA GPUs, or a
// declared fake inventory (`--gpus fake:8xH100-80GB-SXM,nvswitch,mig=...`) that follows the same model
// facts and MIG placement rules (from core's GpuCatalog) so the controller cannot tell the difference.
// Also applies MIG layouts the controller asks for: through NVML on real GPUs (only when the affected
// instances are idle), simulated on fake ones.
//
// Ownership: a GpuBackend is owned by the agent's main loop; not thread-safe (one caller at a time).
// Nothing here changes a GPU except apply_mig_layout; discovery is read-only and never changes MIG
// mode or resets a GPU.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/gpu_catalog.h"
#include "core/status.h"

namespace tessera::agent {

// One MIG instance (a GPU instance with its default compute instance).
struct MigInstanceInfo {
  std::string profile;        // catalog name, e.g. "3g.40gb"
  int start = 0;              // first memory slice of its placement
  int size = 0;               // memory slices it covers
  std::string uuid;           // "MIG-..." (NVML) or synthetic on fake GPUs
  int gpu_instance_id = -1;   // NVML GI id (-1 on fake GPUs)
  int compute_instance_id = -1;
  int64_t memory_used_mib = -1;  // -1 = unknown
  bool operator==(const MigInstanceInfo&) const = default;
};

struct GpuInfo {
  int index = 0;              // NVML index (0..n-1)
  std::string uuid;           // "GPU-..." (synthetic on fake GPUs, stable for a node name)
  std::string model;          // catalog canonical name when known (e.g. "H100-80GB-SXM"), else NVML's name
  std::string nvml_name;      // as NVML reports it ("NVIDIA H100 80GB HBM3"); empty on fake GPUs
  int64_t memory_mib = 0;
  bool mig_enabled = false;   // current MIG mode
  std::vector<MigInstanceInfo> instances;  // ordered by start
  int utilization_pct = -1;   // -1 = unknown
  int64_t memory_used_mib = -1;
};

// Link between two GPUs of the node, nvidia-smi `topo -m` style.
enum class GpuLink { kSelf, kNvSwitch, kNvLink, kPciSwitch /*PIX/PXB*/, kHostBridge /*PHB*/, kNuma /*NODE*/, kSystem /*SYS*/ };
// Stable short names (JSON "links"): X, NVS (NVLink through NVSwitch), NV (direct NVLink), PIX, PHB, NODE,
// SYS. The text report prints NV<count> for both NVLink kinds, as `nvidia-smi topo -m` does.
const char* gpu_link_name(GpuLink l);

struct Inventory {
  std::string source;         // "nvml" or "fake"
  std::string driver_version; // empty on fake
  std::vector<GpuInfo> gpus;  // by index
  // links[i][j]: how GPU i reaches GPU j (square, gpus.size(); kSelf on the diagonal).
  std::vector<std::vector<GpuLink>> links;
  std::vector<std::vector<int>> nvlink_count;  // active NVLink links between i and j (0 = none)
};

// JSON for the heartbeat/registration and for `tessera agent --discover --json`:
// {"source","driver_version","gpus":[{index,uuid,model,nvml_name,memory_mib,mig_enabled,
//   instances:[{profile,start,size,uuid,gpu_instance_id,compute_instance_id,memory_used_mib}],
//   utilization_pct,memory_used_mib}], "links":[["X","NV",...],...], "nvlink_count":[[...]]}
nlohmann::json inventory_to_json(const Inventory& inv);
// Human-readable report for `tessera agent --discover` (GPUs table, MIG instances, link matrix).
std::string inventory_report(const Inventory& inv);

// A layout the controller wants on one GPU: its MIG instances (profile name or "Ng" short form +
// start slice). MIG mode itself is never changed by the agent; an empty list means no instances.
struct MigLayout {
  int gpu = 0;
  std::vector<std::pair<std::string, int>> instances;  // (profile name, start)
};

class GpuBackend {
 public:
  virtual ~GpuBackend() = default;
  // Current inventory, including utilisation and memory used.
  virtual Result<Inventory> inventory() = 0;
  // Makes GPU `layout.gpu` hold exactly `layout.instances`: destroys instances not wanted and
  // creates the missing ones at their explicit placements. Refused (nothing changed) when an
  // instance to destroy is in `busy_uuids` (a task uses it), when MIG mode is off on that GPU
  // (the agent never changes MIG mode), or when the layout breaks the model's placement rules.
  virtual Status apply_mig_layout(const MigLayout& layout, const std::vector<std::string>& busy_uuids) = 0;
  // Fake GPUs only: the agent tells the backend how much of each GPU its running tasks use, in
  // milli-GPU by GPU index, so utilisation "reflects what runs". Real backends ignore it.
  virtual void set_fake_load(const std::vector<int64_t>& milli_by_gpu) { (void)milli_by_gpu; }
};

// Parses "fake:8xH100-80GB-SXM[,nvswitch|nvlink|pcie-pairs|pcie][,mig=SPEC]" for node `node_name` (the
// UUIDs derive from it, so they are stable across restarts and distinct across nodes). The model
// must be in `catalog` (aliases accepted; so is NAME when exactly one canonical name starts with
// "NAME-"; "H100-80GB" matches two and is refused, naming both). Count 1..64. Topologies: see fake_gpus.cc;
// default nvswitch when the model has NVLink, else pcie. SPEC: MIG mode on every GPU with the listed
// instances, e.g. "mig=3g.40gb@0+3g.40gb@4" (profile@start, '+'-separated; "1g.10gb+me@0" is one
// profile; "Ng" short names and a missing @start, meaning NVIDIA's first-fit order, are accepted) or
// "mig=on" (MIG mode on, no instances), validated by core's MigLayout rules. Errors name the part
// and the fix.
Result<std::unique_ptr<GpuBackend>> make_fake_backend(const std::string& spec, const std::string& node_name,
                                                      const GpuCatalog& catalog);
// Loads libnvidia-ml.so.1 with dlopen (no link-time dependency). Error (kUnavailable) when the
// library or a device is missing, saying so; models are matched to `catalog` by NVML name.
Result<std::unique_ptr<GpuBackend>> make_nvml_backend(const GpuCatalog& catalog);

}  // namespace tessera::agent
