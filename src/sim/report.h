// Reports of `tessera sim run`: the JSON array (one object per policy, stable keys documented in
// docs/simulator.md) and a self-contained HTML page (inline SVG charts: utilisation over time, queue
// length, JCT CDF, per-team GPUs; a policy comparison table). Pure functions.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/sim_run.h"

namespace tessera::sim {

nlohmann::json metrics_json(const SimMetrics& m);
std::string render_html_report(const std::vector<SimReport>& reports, const std::string& title);

}  // namespace tessera::sim
