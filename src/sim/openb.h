// Loading the openb traces (Alibaba GPU-sharing cluster, as shipped with the FGD artifact):
// node lists (sn,cpu_milli,memory_mib,gpu,model) into a ClusterState, pod lists
// (name,cpu_milli,memory_mib,num_gpu,gpu_milli[,gpu_spec,qos,...,creation_time,deletion_time,
// scheduled_time]) into task requests and, when present, their times.
// Columns are found by header name; errors name the file, line and field.
// Plain functions; thread-compatible.
#pragma once

#include <istream>
#include <optional>
#include <string>
#include <vector>

#include "core/cluster.h"
#include "core/request.h"
#include "core/status.h"

namespace tessera::sim {

// A pod's times in seconds, when the list has them (openb_pod_list_default.csv has creation_time,
// deletion_time and scheduled_time; the sampled variants have none). A pod never scheduled has no
// scheduled time.
struct OpenbTimes {
  int64_t creation = 0, deletion = 0;
  std::optional<int64_t> scheduled;
};

struct OpenbPod {
  std::string name;
  TaskRequest task;
  std::string qos;                   // empty when the list has no qos column
  std::optional<OpenbTimes> times;   // set when the list has the three time columns
};

// `source` names the input in error messages (usually the file path).
Result<ClusterState> parse_openb_nodes(std::istream& in, const std::string& source,
                                       const GpuCatalog& catalog = GpuCatalog::builtin());
Result<std::vector<OpenbPod>> parse_openb_pods(std::istream& in, const std::string& source,
                                               const GpuCatalog& catalog = GpuCatalog::builtin());
Result<ClusterState> load_openb_nodes(const std::string& path, const GpuCatalog& catalog = GpuCatalog::builtin());
Result<std::vector<OpenbPod>> load_openb_pods(const std::string& path, const GpuCatalog& catalog = GpuCatalog::builtin());

}  // namespace tessera::sim
