#include "config/job_spec_workflow.h"

#include <algorithm>
#include <charconv>
#include <set>

#include "config/job_spec_container.h"
#include "config/yaml_fields.h"

namespace tessera::config {

using json = nlohmann::json;

namespace {

constexpr int64_t kMaxBegin = 253402300799;  // 9999-12-31T23:59:59Z
constexpr size_t kMaxPatternBytes = 1024;

std::string quoted(std::string_view s) {
  std::string out = "\"";
  for (size_t i = 0; i < s.size() && i < 64; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    out += (c < 0x20 || c >= 0x7f) ? '?' : s[i];
  }
  return out + (s.size() > 64 ? "...\"" : "\"");
}

// A decimal integer of digits only (no sign, no spaces), at most `hi`.
bool number(std::string_view s, int64_t hi, int64_t& out) {
  if (s.empty() || s.size() > 18) return false;
  for (char c : s)
    if (c < '0' || c > '9') return false;
  std::from_chars(s.data(), s.data() + s.size(), out);
  return out <= hi;
}

std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  size_t start = 0;
  for (size_t i = 0; i <= s.size(); ++i)
    if (i == s.size() || s[i] == sep) {
      out.push_back(s.substr(start, i - start));
      start = i + 1;
    }
  return out;
}

}  // namespace

Result<JobRef> parse_job_ref(std::string_view text) {
  const auto bad = [&] {
    return invalid_argument("job reference " + quoted(text) + ": expected a job id (12) or an array element (12_3)");
  };
  JobRef r;
  const size_t us = text.find('_');
  int64_t id = 0, index = -1;
  if (!number(text.substr(0, us), int64_t(UINT32_MAX), id) || id <= 0) return bad();
  if (us != std::string_view::npos && !number(text.substr(us + 1), kMaxArrayIndex, index)) return bad();
  r.id = id;
  r.index = int32_t(index);
  return r;
}

std::string job_ref_text(const JobRef& r) {
  return std::to_string(r.id) + (r.index >= 0 ? "_" + std::to_string(r.index) : "");
}

Result<ArraySpec> parse_array_spec(std::string_view text) {
  const auto bad = [&](const std::string& why) {
    return invalid_argument("array: " + quoted(text) + ": " + why +
                            " (e.g. \"0-99\", \"0-99%8\" for at most 8 running, \"1,3,5-7\", \"0-15:4\")");
  };
  if (text.empty() || text.size() > 4096) return bad("must be 1..4096 characters");
  ArraySpec a;
  a.text = std::string(text);
  std::string_view list = text;
  if (const size_t pct = text.find('%'); pct != std::string_view::npos) {
    int64_t m = 0;
    if (!number(text.substr(pct + 1), int64_t(kMaxArrayElements), m) || m < 1)
      return bad("%N must be 1.." + std::to_string(kMaxArrayElements));
    a.max_running = int32_t(m);
    list = text.substr(0, pct);
  }
  std::set<int32_t> seen;
  for (std::string_view part : split(list, ',')) {
    std::string_view range = part;
    int64_t step = 1;
    if (const size_t colon = part.find(':'); colon != std::string_view::npos) {
      if (!number(part.substr(colon + 1), kMaxArrayIndex, step) || step < 1) return bad("a step (:N) must be 1.." + std::to_string(kMaxArrayIndex));
      range = part.substr(0, colon);
    }
    int64_t lo = 0, hi = 0;
    if (const size_t dash = range.find('-'); dash != std::string_view::npos) {
      if (!number(range.substr(0, dash), kMaxArrayIndex, lo) || !number(range.substr(dash + 1), kMaxArrayIndex, hi))
        return bad("indices must be 0.." + std::to_string(kMaxArrayIndex));
      if (hi < lo) return bad("a range's end is below its start");
    } else {
      if (!number(range, kMaxArrayIndex, lo)) return bad("indices must be 0.." + std::to_string(kMaxArrayIndex));
      if (step != 1) return bad("a step needs a range (0-15:4)");
      hi = lo;
    }
    for (int64_t i = lo; i <= hi; i += step) {
      seen.insert(int32_t(i));
      if (seen.size() > kMaxArrayElements) return bad("at most " + std::to_string(kMaxArrayElements) + " elements");
    }
  }
  a.indices.assign(seen.begin(), seen.end());
  return a;
}

const char* dependency_type_name(DependencyType t) {
  switch (t) {
    case DependencyType::kAfter: return "after";
    case DependencyType::kAfterAny: return "afterany";
    case DependencyType::kAfterOk: return "afterok";
    case DependencyType::kAfterNotOk: return "afternotok";
    case DependencyType::kSingleton: return "singleton";
  }
  return "?";
}

Result<std::vector<Dependency>> parse_dependencies(std::string_view text) {
  const auto bad = [&](const std::string& why) {
    return invalid_argument("dependency: " + quoted(text) + ": " + why +
                            " (e.g. \"afterok:12:13\", \"afterany:12_3\", \"after:12,singleton\"; types after, afterany, "
                            "afterok, afternotok, singleton)");
  };
  std::vector<Dependency> out;
  if (text.empty()) return out;
  if (text.size() > 64 * 1024) return bad("at most 65536 characters");
  size_t refs = 0;
  for (std::string_view part : split(text, ',')) {
    const std::vector<std::string_view> words = split(part, ':');
    Dependency d;
    bool known = false;
    for (DependencyType t : {DependencyType::kAfter, DependencyType::kAfterAny, DependencyType::kAfterOk,
                             DependencyType::kAfterNotOk, DependencyType::kSingleton})
      if (words[0] == dependency_type_name(t)) d.type = t, known = true;
    if (!known) return bad("unknown type " + quoted(words[0]));
    if (d.type == DependencyType::kSingleton) {
      if (words.size() != 1) return bad("singleton takes no job ids");
    } else {
      if (words.size() < 2) return bad(std::string(dependency_type_name(d.type)) + " needs job ids");
      for (size_t i = 1; i < words.size(); ++i) {
        auto ref = parse_job_ref(words[i]);
        if (!ref.ok()) return bad(ref.error().message);
        d.jobs.push_back(*ref);
        if (++refs > kMaxDependencyRefs) return bad("at most " + std::to_string(kMaxDependencyRefs) + " job ids");
      }
    }
    out.push_back(std::move(d));
  }
  return out;
}

std::string dependencies_text(const std::vector<Dependency>& deps) {
  std::string out;
  for (const Dependency& d : deps) {
    out += (out.empty() ? "" : ",") + std::string(dependency_type_name(d.type));
    for (const JobRef& r : d.jobs) out += ":" + job_ref_text(r);
  }
  return out;
}

Status parse_workflow(const json& j, WorkflowSpec& w) {
  const auto present = [&](const char* k) { return j.contains(k) && !j[k].is_null(); };
  const auto string_at = [&](const char* k, std::string& out) -> Status {
    if (!j[k].is_string()) return invalid_argument(std::string(k) + ": must be a string");
    out = j[k].get<std::string>();
    return {};
  };
  const auto bool_at = [&](const char* k, bool& out) -> Status {
    if (!j[k].is_boolean()) return invalid_argument(std::string(k) + ": must be true or false");
    out = j[k].get<bool>();
    return {};
  };
  if (present("array")) {
    std::string text;
    TESSERA_TRY(string_at("array", text));
    auto a = parse_array_spec(text);
    if (!a.ok()) return a.error();
    w.array = std::move(*a);
  }
  if (present("dependency")) {
    std::string text;
    TESSERA_TRY(string_at("dependency", text));
    auto d = parse_dependencies(text);
    if (!d.ok()) return d.error();
    w.dependencies = std::move(*d);
  }
  if (present("kill_on_invalid_dep")) TESSERA_TRY(bool_at("kill_on_invalid_dep", w.kill_on_invalid_dep));
  if (present("hold")) TESSERA_TRY(bool_at("hold", w.hold));
  if (present("begin")) {
    const json& b = j["begin"];
    if (!b.is_number_integer() && !b.is_number_unsigned())
      return invalid_argument("begin: must be unix seconds (an integer; the CLI takes 2026-12-24T18:00 or now+2h)");
    const int64_t v = b.is_number_unsigned() && b.get<uint64_t>() > uint64_t(kMaxBegin) ? kMaxBegin + 1 : b.get<int64_t>();
    if (v < 0 || v > kMaxBegin) return invalid_argument("begin: must be 0..253402300799 (unix seconds)");
    w.begin = v;
  }
  for (const char* k : {"output", "error"}) {
    if (!present(k)) continue;
    std::string& out = std::string_view(k) == "output" ? w.output : w.error;
    TESSERA_TRY(string_at(k, out));
    if (out.empty()) continue;
    if (out.size() > kMaxPatternBytes) return invalid_argument(std::string(k) + ": at most 1024 bytes");
    // A pattern expands to a path; check the path a pattern could give with every field filled.
    const std::string sample = expand_output_pattern(out, 1, 1, 0, 0, "job", "user");
    if (const std::string why = path_problem(sample); !why.empty()) return invalid_argument(std::string(k) + ": " + why);
    if (sample == "/") return invalid_argument(std::string(k) + ": must name a file");
  }
  return {};
}

void workflow_to_json(const WorkflowSpec& w, json& j) {
  j["array"] = w.array ? json(w.array->text) : json(nullptr);
  j["dependency"] = w.dependencies.empty() ? json(nullptr) : json(dependencies_text(w.dependencies));
  j["kill_on_invalid_dep"] = w.kill_on_invalid_dep;
  j["begin"] = w.begin;
  j["hold"] = w.hold;
  j["output"] = w.output;
  j["error"] = w.error;
}

std::string expand_output_pattern(std::string_view p, int64_t job_id, int64_t array_job_id, int32_t array_index, int task,
                                  std::string_view name, std::string_view user) {
  std::string out;
  for (size_t i = 0; i < p.size(); ++i) {
    if (p[i] != '%' || i + 1 == p.size()) {
      out += p[i];
      continue;
    }
    switch (p[++i]) {
      case 'j': out += std::to_string(job_id); break;
      case 'A': out += std::to_string(array_job_id > 0 ? array_job_id : job_id); break;
      case 'a': out += array_index >= 0 ? std::to_string(array_index) : std::string("4294967294"); break;
      case 't': out += std::to_string(task); break;
      case 'x': out += name; break;
      case 'u': out += user; break;
      case '%': out += '%'; break;
      default: out += '%', out += p[i];
    }
  }
  return out;
}

}  // namespace tessera::config
