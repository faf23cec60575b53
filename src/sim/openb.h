// Loading the openb traces (Alibaba GPU-sharing cluster, as shipped with the FGD artifact):
// node lists (sn,cpu_milli,memory_mib,gpu,model) into a ClusterState, pod lists
// (name,cpu_milli,memory_mib,num_gpu,gpu_milli[,gpu_spec,...]) into task requests.
// Columns are found by header name; errors name the file, line and field.
// Plain functions; thread-compatible.
#pragma once

#include <istream>
#include <string>
#include <vector>

#include "core/cluster.h"
#include "core/request.h"
#include "core/status.h"

namespace tessera::sim {

struct OpenbPod {
  std::string name;
  TaskRequest task;
};

// `source` names the input in error messages (usually the file path).
Result<ClusterState> parse_openb_nodes(std::istream& in, const std::string& source,
                                       const GpuCatalog& catalog = GpuCatalog::builtin());
Result<std::vector<OpenbPod>> parse_openb_pods(std::istream& in, const std::string& source,
                                               const GpuCatalog& catalog = GpuCatalog::builtin());
Result<ClusterState> load_openb_nodes(const std::string& path, const GpuCatalog& catalog = GpuCatalog::builtin());
Result<std::vector<OpenbPod>> load_openb_pods(const std::string& path, const GpuCatalog& catalog = GpuCatalog::builtin());

}  // namespace tessera::sim
