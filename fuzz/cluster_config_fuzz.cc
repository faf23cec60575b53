// libFuzzer target: the cluster configuration (config/cluster_config.h). Any input must give an error
// with a message or a config whose cluster builds; a crash or an escaped exception aborts. Built only
// with clang (fuzz/CMakeLists.txt); see docs/fuzzing.md.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "config/cluster_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tessera::config;
  auto r = parse_cluster_config_yaml(std::string_view(reinterpret_cast<const char*>(data), size));
  if (!r.ok()) {
    if (r.error().message.empty()) {
      std::fprintf(stderr, "error without a message\n");
      std::abort();
    }
    return 0;
  }
  if (!r->catalog || !build_cluster_state(*r).ok()) {
    std::fprintf(stderr, "a validated config does not build\n");
    std::abort();
  }
  return 0;
}
