// GPU catalog: the facts Tessera knows about each GPU model (memory, SMs, NVLink generation) and,
// for MIG-capable models, the full GPU-instance profile table with NVIDIA's allowed placements
// (start memory slice + size on the 8-slice axis, 4 on A30). Built-in models come from
// ../shared/reference/hardware.md; more may be declared in config.
// Immutable after construction; safe to share across threads for reading.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/quantity.h"
#include "core/status.h"

namespace tessera {

// One GPU-instance profile, e.g. "3g.40gb" (nvidia-smi GI profile id 9) on an A100-80GB.
struct MigProfile {
  int id = 0;                 // nvidia-smi GI profile id (19, 20, 15, 14, 9, 5, 0; A30: 14, 21, 5, 6, 0)
  std::string name;           // e.g. "1g.10gb", "1g.10gb+me", "7g.80gb"
  int compute_slices = 0;     // the "Ng" part
  int memory_slices = 0;      // placement size on the memory-slice axis
  uint8_t allowed_starts = 0; // bit i set: the profile may start at memory slice i
  int max_instances = 0;      // per GPU
  bool media_extension = false;  // "+me": at most one such instance per GPU
  MiB memory{0};              // usable memory of the instance
  int sms = 0;
};

struct GpuModel {
  std::string name;                  // canonical, e.g. "A100-80GB", "H100-80GB-SXM", "T4", "G1"
  std::vector<std::string> aliases;  // other accepted spellings, e.g. "NVIDIA A100-SXM4-80GB", "V100M16"
  MiB memory{0};
  int sms = 0;
  int nvlink_generation = 0;  // 0 = none
  int memory_slices = 0;      // MIG memory-slice axis width: 8, or 4 on A30; 0 = not MIG-capable
  int compute_slices = 0;     // 7, or 4 on A30; 0 = not MIG-capable
  std::vector<MigProfile> mig_profiles;  // ordered by id as nvidia-smi lists them

  bool mig_capable() const { return memory_slices > 0; }
  // Profile by name, case-insensitive ("3g.40gb"), or by short compute form "Ng": the non-+me profile
  // with N compute slices and the FEWEST memory slices (first listed on a tie). So on A100-40GB "1g" is
  // 1g.5gb (not 1g.10gb), "3g" is 3g.20gb; on A30 "2g" is 2g.12gb. nullptr if none.
  const MigProfile* find_profile(std::string_view name_or_short) const;
  const MigProfile* find_profile_id(int id) const;
};

// "{0,2,4}": the memory slices whose bits are set in `mask`, ascending. For error messages.
std::string slice_set_string(uint8_t mask);

class GpuCatalog {
 public:
  // The catalog of built-in models: A100-40GB, A100-80GB, A30, H100-80GB-SXM, H100-80GB-PCIE, H100-NVL,
  // H200-141GB, and non-MIG V100-16GB, V100-32GB, T4, P100, A10, L4, L40S, G1, G2, G3.
  static const GpuCatalog& builtin();

  GpuCatalog() = default;
  // Adds a model declared in config; error if the name or an alias is already known (case-insensitive) or
  // fields are bad: empty name, memory_slices not in {0,4,8}, compute_slices not in 1..memory_slices
  // (0 for non-MIG), profiles with a start + size past the axis, duplicate profile ids/names, etc.
  Status add(GpuModel model);
  // By canonical name or alias (case-insensitive). Error lists the known names and says how to declare one.
  Result<const GpuModel*> find(std::string_view name) const;
  std::vector<std::string> names() const;  // canonical names, sorted
  // A catalog holding the built-ins plus extra declared models.
  static Result<GpuCatalog> with_extra(std::vector<GpuModel> extra);

 private:
  std::vector<std::shared_ptr<const GpuModel>> models_;
};

}  // namespace tessera
