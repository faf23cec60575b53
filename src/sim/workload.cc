#include "sim/workload.h"

namespace tessera::sim {

Result<Workload> load_workload(const std::string& spec) {
  return invalid_argument("--workload \"" + spec + "\": loaders are not built yet");
}

}  // namespace tessera::sim
