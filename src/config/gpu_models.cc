// Declared GPU models (see gpu_models.h): JSON fields read into core GpuModel values. Stateless; thread-safe.
#include "config/gpu_models.h"

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

namespace tessera::config {
namespace {

using nlohmann::json;

template <class T>
Status read(const json& j, const char* key, const std::string& at, T& out, bool required = false) {
  if (!j.contains(key)) return required ? invalid_argument(at + "." + key + ": required") : Status();
  try {
    out = j[key].get<T>();
  } catch (const json::exception&) {
    return invalid_argument(at + "." + key + ": wrong type (" + j[key].type_name() + ")");
  }
  return {};
}

}  // namespace

Result<std::vector<GpuModel>> parse_gpu_models(const std::string& text) {
  json j = json::parse(text, nullptr, false);
  if (j.is_discarded()) return invalid_argument("gpu models file: not valid JSON");
  if (!j.is_object() || !j.contains("gpu_models") || !j["gpu_models"].is_array())
    return invalid_argument("gpu models file: expected {\"gpu_models\": [...]}");
  return gpu_models_from_json(j["gpu_models"]);
}

Result<std::vector<GpuModel>> gpu_models_from_json(const json& list) {
  if (!list.is_array()) return invalid_argument("gpu_models: must be a list of models");
  std::vector<GpuModel> out;
  for (size_t i = 0; i < list.size(); ++i) {
    const json& m = list[i];
    const std::string at = "gpu_models[" + std::to_string(i) + "]";
    if (!m.is_object()) return invalid_argument(at + ": must be an object");
    GpuModel g;
    int64_t mem = 0;
    Status s;
    if (!(s = read(m, "name", at, g.name, true)).ok() || !(s = read(m, "aliases", at, g.aliases)).ok() ||
        !(s = read(m, "memory_mib", at, mem, true)).ok() || !(s = read(m, "sms", at, g.sms)).ok() ||
        !(s = read(m, "nvlink_generation", at, g.nvlink_generation)).ok() ||
        !(s = read(m, "memory_slices", at, g.memory_slices)).ok() ||
        !(s = read(m, "compute_slices", at, g.compute_slices)).ok())
      return s.error();
    g.memory = MiB(mem);
    if (m.contains("mig_profiles")) {
      if (!m["mig_profiles"].is_array()) return invalid_argument(at + ".mig_profiles: must be an array");
      for (size_t k = 0; k < m["mig_profiles"].size(); ++k) {
        const json& p = m["mig_profiles"][k];
        const std::string pat = at + ".mig_profiles[" + std::to_string(k) + "]";
        if (!p.is_object()) return invalid_argument(pat + ": must be an object");
        MigProfile prof;
        std::vector<int> starts;
        int64_t pmem = 0;
        if (!(s = read(p, "id", pat, prof.id, true)).ok() || !(s = read(p, "name", pat, prof.name, true)).ok() ||
            !(s = read(p, "compute_slices", pat, prof.compute_slices, true)).ok() ||
            !(s = read(p, "memory_slices", pat, prof.memory_slices, true)).ok() ||
            !(s = read(p, "starts", pat, starts, true)).ok() ||
            !(s = read(p, "max_instances", pat, prof.max_instances, true)).ok() ||
            !(s = read(p, "media_extension", pat, prof.media_extension)).ok() ||
            !(s = read(p, "memory_mib", pat, pmem)).ok() || !(s = read(p, "sms", pat, prof.sms)).ok())
          return s.error();
        for (int st : starts) {
          if (st < 0 || st > 7) return invalid_argument(pat + ".starts: slice " + std::to_string(st) + " is not in 0..7");
          prof.allowed_starts = uint8_t(prof.allowed_starts | (1u << st));
        }
        prof.memory = MiB(pmem);
        g.mig_profiles.push_back(std::move(prof));
      }
    }
    out.push_back(std::move(g));
  }
  return out;
}

Result<std::shared_ptr<const GpuCatalog>> load_catalog_with(const std::string& path) {
  std::ifstream in(path);
  if (!in) return invalid_argument(path + ": cannot open file");
  std::stringstream ss;
  ss << in.rdbuf();
  auto models = parse_gpu_models(ss.str());
  if (!models.ok()) return invalid_argument(path + ": " + models.error().message);
  auto cat = GpuCatalog::with_extra(std::move(*models));
  if (!cat.ok()) return invalid_argument(path + ": " + cat.error().message);
  return std::shared_ptr<const GpuCatalog>(std::make_shared<GpuCatalog>(std::move(*cat)));
}

}  // namespace tessera::config
