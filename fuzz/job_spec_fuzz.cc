// libFuzzer target: job specs (config/job_spec.h) in JSON and in YAML. Any input must give an error
// with a message or a spec that survives the canonical round trip; a crash, an escaped exception or
// a broken round trip aborts. Built only with clang (fuzz/CMakeLists.txt); see docs/fuzzing.md.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "config/job_spec.h"

namespace {

void check(const tessera::Result<tessera::config::JobSpec>& r) {
  using namespace tessera::config;
  if (!r.ok()) {
    if (r.error().message.empty()) {
      std::fprintf(stderr, "error without a message\n");
      std::abort();
    }
    return;
  }
  auto back = job_spec_from_json(job_spec_to_json(*r));
  if (!back.ok() || !(*back == *r)) {
    std::fprintf(stderr, "round trip failed: %s\n", back.ok() ? "spec changed" : back.error().message.c_str());
    std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  check(tessera::config::parse_job_spec_json(text));
  check(tessera::config::parse_job_spec_yaml(text));
  return 0;
}
