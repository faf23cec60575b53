// GPUs for containers through CDI, the Container Device Interface (podman, containerd and Docker
// read CDI specs from /etc/cdi and /var/run/cdi; NVIDIA's `nvidia-ctk cdi generate` writes them on
// GPU nodes). A task's GPUs are named by UUID: "nvidia.com/gpu=GPU-..." for a whole GPU,
// "nvidia.com/gpu=MIG-..." for a MIG instance. On NVML nodes the host's spec must define those
// names (docs/containers.md); on fake GPUs the agent writes a spec of the same shape whose device
// nodes are placeholders (/dev/null behind /dev/nvidiaN), so the same path runs in tests.
// cdiVersion 0.5.0: the newest podman 4.3 accepts. Pure functions except write_fake_cdi_spec.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "agent/gpu_inventory.h"
#include "core/status.h"

namespace tessera::agent {

inline constexpr const char* kCdiKind = "nvidia.com/gpu";

// The CDI names of a task's devices: the GPUs at `gpu_indices`, or one MIG instance (gpu, start)
// when mig_gpu >= 0. Error: an index or instance the inventory lacks.
Result<std::vector<std::string>> cdi_devices(const Inventory& inv, const std::vector<int>& gpu_indices, int mig_gpu = -1,
                                             int mig_start = -1);

// The spec for a fake inventory: one device per GPU (/dev/nvidiaI) and per MIG instance (its GPU's
// node and /dev/nvidia-caps/nvidia-capN), /dev/nvidiactl and /dev/nvidia-uvm for all, each a
// placeholder bound to /dev/null.
nlohmann::json fake_cdi_spec(const Inventory& inv);

// Writes fake_cdi_spec(inv) to DIR/tessera-fake-NODE.json (atomically: temp file and rename).
// The name depends on the node only, so a restarted agent replaces its own file.
Status write_fake_cdi_spec(const std::string& dir, const std::string& node, const Inventory& inv);

}  // namespace tessera::agent
