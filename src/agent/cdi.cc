// CDI specs and device names. See cdi.h.
#include "agent/cdi.h"

#include <cstdio>
#include <filesystem>
#include <fstream>

namespace tessera::agent {

using Json = nlohmann::json;
namespace fs = std::filesystem;

Result<std::vector<std::string>> cdi_devices(const Inventory& inv, const std::vector<int>& gpu_indices, int mig_gpu,
                                             int mig_start) {
  std::vector<std::string> out;
  const std::string kind = std::string(kCdiKind) + "=";
  if (mig_gpu >= 0) {
    if (size_t(mig_gpu) >= inv.gpus.size()) return not_found("GPU " + std::to_string(mig_gpu) + " is not on this node");
    for (const MigInstanceInfo& m : inv.gpus[size_t(mig_gpu)].instances)
      if (m.start == mig_start && !m.uuid.empty()) return std::vector<std::string>{kind + m.uuid};
    return not_found("GPU " + std::to_string(mig_gpu) + " has no MIG instance at slice " + std::to_string(mig_start));
  }
  for (int i : gpu_indices) {
    if (i < 0 || size_t(i) >= inv.gpus.size() || inv.gpus[size_t(i)].uuid.empty())
      return not_found("GPU " + std::to_string(i) + " is not on this node");
    out.push_back(kind + inv.gpus[size_t(i)].uuid);
  }
  return out;
}

Json fake_cdi_spec(const Inventory& inv) {
  auto node = [](const std::string& path) { return Json{{"path", path}, {"hostPath", "/dev/null"}}; };
  Json devices = Json::array();
  int cap = 1;
  for (const GpuInfo& g : inv.gpus) {
    const std::string dev = "/dev/nvidia" + std::to_string(g.index);
    devices.push_back(Json{{"name", g.uuid}, {"containerEdits", {{"deviceNodes", Json::array({node(dev)})}}}});
    for (const MigInstanceInfo& m : g.instances)
      devices.push_back(Json{{"name", m.uuid},
                             {"containerEdits",
                              {{"deviceNodes", Json::array({node(dev), node("/dev/nvidia-caps/nvidia-cap" + std::to_string(cap++))})}}}});
  }
  return Json{{"cdiVersion", "0.5.0"},
              {"kind", kCdiKind},
              {"devices", devices},
              {"containerEdits", {{"deviceNodes", Json::array({node("/dev/nvidiactl"), node("/dev/nvidia-uvm")})},
                                  {"env", Json::array({"TESSERA_FAKE_GPUS=1"})}}}};
}

Status write_fake_cdi_spec(const std::string& dir, const std::string& node, const Inventory& inv) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return failed_precondition("cannot create the CDI directory " + dir + ": " + ec.message());
  const std::string path = dir + "/tessera-fake-" + node + ".json", tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << fake_cdi_spec(inv).dump(2) << "\n";
    if (!out) return failed_precondition("cannot write " + tmp);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) return failed_precondition("cannot rename " + tmp + " to " + path);
  return {};
}

}  // namespace tessera::agent
