// The Slurm-style workflow fields of a job spec: job arrays ("array": "0-99%8"), dependencies
// ("dependency": "afterok:12:13_2,singleton"), a held submission, a begin time, and output file
// patterns. The types, their strict parsing from the spec's JSON tree, and their canonical JSON.
// job_spec.h includes this; job_spec_from_json and job_spec_to_json call it. Value types; pure
// functions (thread-safe).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"

namespace tessera::config {

// A job as users name it: "12" (a job, or every element of the array job 12) or "12_3" (element 3 of
// the array job 12).
struct JobRef {
  int64_t id = 0;      // > 0
  int32_t index = -1;  // array index; -1 = the job itself (or the whole array)
  bool operator==(const JobRef&) const = default;
  auto operator<=>(const JobRef&) const = default;
};
Result<JobRef> parse_job_ref(std::string_view text);  // errors say what a reference looks like
std::string job_ref_text(const JobRef& r);

inline constexpr int32_t kMaxArrayIndex = 9999999;
inline constexpr size_t kMaxArrayElements = 10000;

// "0-99%8": indices 0..99, at most 8 running at once. Also "1,3,5-7" and "0-15:4" (a step).
struct ArraySpec {
  std::vector<int32_t> indices;  // sorted, unique, non-empty, each 0..kMaxArrayIndex
  int32_t max_running = 0;       // 0 = no limit
  std::string text;              // as written (validated)
  bool operator==(const ArraySpec& o) const { return indices == o.indices && max_running == o.max_running; }
};
Result<ArraySpec> parse_array_spec(std::string_view text);  // errors name "array"

enum class DependencyType : uint8_t { kAfter, kAfterAny, kAfterOk, kAfterNotOk, kSingleton };
const char* dependency_type_name(DependencyType t);  // "after", "afterany", "afterok", "afternotok", "singleton"

struct Dependency {
  DependencyType type = DependencyType::kAfterOk;
  std::vector<JobRef> jobs;  // empty for singleton
  bool operator==(const Dependency&) const = default;
};
inline constexpr size_t kMaxDependencyRefs = 1000;
// "afterok:12:13_2,afterany:14,singleton": every part must hold. Errors name "dependency".
Result<std::vector<Dependency>> parse_dependencies(std::string_view text);
std::string dependencies_text(const std::vector<Dependency>& deps);  // canonical form; "" for none

struct WorkflowSpec {
  std::optional<ArraySpec> array;
  std::vector<Dependency> dependencies;
  bool kill_on_invalid_dep = false;  // cancel the job when a dependency can never be satisfied
  int64_t begin = 0;                 // unix seconds; not started before; 0 = no begin time
  bool hold = false;                 // submitted held: pending until released
  std::string output, error;         // file patterns (%j %A %a %t %x %u %%), written on the node; "" = none
  bool operator==(const WorkflowSpec&) const = default;
};

// Keys of the spec's top level this file parses and writes.
inline const std::vector<std::string> kWorkflowKeys = {"array", "dependency", "kill_on_invalid_dep", "begin", "hold", "output", "error"};
// Reads the workflow keys of a spec's top-level object (others are the caller's).
Status parse_workflow(const nlohmann::json& spec, WorkflowSpec& out);
// Writes the workflow keys into a spec's JSON.
void workflow_to_json(const WorkflowSpec& w, nlohmann::json& spec);

// An output pattern expanded for one task: %j job id, %A array job id, %a array index, %t task,
// %x job name, %u user, %% a percent sign. Pure; the caller checks the result is a usable path.
std::string expand_output_pattern(std::string_view pattern, int64_t job_id, int64_t array_job_id, int32_t array_index, int task,
                                  std::string_view name, std::string_view user);

}  // namespace tessera::config
