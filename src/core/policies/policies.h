// Internal factories of the built-in scoring policies; the public entry point is make_policy()
// in core/placement/policy.h.
#pragma once

#include <memory>

#include "core/placement/policy.h"

namespace tessera::policies {

std::unique_ptr<ScoringPolicy> make_random();
std::unique_ptr<ScoringPolicy> make_dotprod();
std::unique_ptr<ScoringPolicy> make_gpu_packing();
std::unique_ptr<ScoringPolicy> make_gpu_clustering();
std::unique_ptr<ScoringPolicy> make_best_fit();
std::unique_ptr<ScoringPolicy> make_spread();
std::unique_ptr<ScoringPolicy> make_first_fit();
std::unique_ptr<ScoringPolicy> make_fgd();
std::unique_ptr<ScoringPolicy> make_tessera();

}  // namespace tessera::policies
