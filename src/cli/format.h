// Pure helpers of the client verbs (tessera jobs, queues, nodes, ...): table rendering with column
// widths computed from the content, relative times and durations ("in 12m", "3h ago"), GPU amounts
// and per-class maps ("h100:16"), the per-node GPU/MIG map, quantities (MiB, milli-cores), the
// server URL and query-string encoding, durations and mounts given as flags. No I/O, no global
// state: every function is thread-safe and unit-tested in tests/server/cli_format_test.cc.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"

namespace tessera::cli {

// ---- Tables ----

struct Table {
  std::vector<std::string> headers;
  std::vector<std::vector<std::string>> rows;  // a short row is padded with empty cells
  std::vector<bool> right_align;               // per column; absent = left-aligned
};

// One line per row (the header first), columns separated by two spaces, each as wide as its widest
// cell (counted in UTF-8 code points). The last column is not padded; no trailing spaces.
std::vector<std::string> render_table_lines(const Table& t);
// The same lines joined, each ending in '\n'.
std::string render_table(const Table& t);

// `s` cut to at most `max` code points, ending in "..." when cut (max >= 4).
std::string truncate(std::string_view s, size_t max);

// An event's detail for people, "key=value ..." (a detail stored as a JSON string is parsed first);
// a placement reads "task 0 on n-3 GPUs 0,1; ..." (or "16 tasks on 2 nodes: n-3 (8), n-4 (8)"),
// never a cut-off JSON array.
std::string compact_detail(const nlohmann::json& detail);

// ---- Times and durations ----

// A short duration: "45s", "12m", "3h", "3h20m", "2d", "2d4h". Negative values count as 0.
std::string format_duration_short(int64_t seconds);
// `t` relative to `now`: "in 12m", "3h ago", "now" (within 1 s).
std::string format_relative(int64_t t, int64_t now);
// An estimated start: "-" if unknown, "now" if due, else "in 12m".
std::string format_eta(std::optional<int64_t> estimated_start, int64_t now);
// Unix seconds as local time "2026-12-03 10:14:03" ("-" for 0).
std::string format_local_time(int64_t t);

// ---- Amounts ----

// Milli-GPU as GPUs with at most one decimal: 16000 -> "16", 500 -> "0.5", 1250 -> "1.3".
std::string format_gpus(int64_t milli);
// A GPU class name shortened for tables: "H100-80GB-SXM" -> "h100" (lower case, up to the first
// '-'), unless another name in `all` shortens to the same; then the full name in lower case.
std::string short_gpu_class(const std::string& name, const std::vector<std::string>& all);
// A per-class amount map {"H100-80GB-SXM": 16000} as "h100:16 a100:8" ("-" when empty). `all` is
// every class name shown in the table (for short_gpu_class).
std::string format_class_amounts(const nlohmann::json& amounts, const std::vector<std::string>& all);
// MiB as "512Mi", "64Gi", "1.5Ti" (one decimal at most); "0" for 0.
std::string format_mib(int64_t mib);
// Milli-cores as cores: 32000 -> "32", 500 -> "0.5".
std::string format_cores(int64_t milli);

// A job spec's per-task resources ({"gpus", "gpu_models", "mig", "gpu_milli", "gpu_memory", "cpu",
// "memory"}) in words: "8 GPUs (H100-80GB-SXM), 32 cpu, 256Gi memory", "MIG 3g.40gb, ...",
// "0.5 of 1 GPU, 20Gi GPU memory, ...". cpu may be cores (integer) or "500m"; memory MiB or "64Gi".
std::string describe_resources(const nlohmann::json& resources);

// ---- Nodes ----

// A node's GPUs (the "gpus" array of GET /nodes) as one line: the non-MIG GPUs in one bracket, one
// character each ('#' fully used, '+' partly used, '.' free, 'x' unhealthy), then one bracket per MIG
// GPU listing its instances as "3g:17" (profile up to the '.', then the job or '-' when unused), e.g.
// "[##+.] [3g:17|1g:-]". "-" when there are no GPUs.
std::string render_gpu_map(const nlohmann::json& gpus);

// ---- Server URL and queries ----

struct ServerUrl {
  std::string scheme = "http";
  std::string host;
  int port = 8420;
  std::string base() const;  // "http://host:port" ("[...]" around an IPv6 host)
};

// "http://host:port", "https://host:port", "http://host" (port 8420), "host:port" or "host" (scheme
// http); "[::1]:8420" for IPv6; a trailing '/' is allowed. Paths and other schemes are rejected with
// a message that says why and what to use.
Result<ServerUrl> parse_server_url(std::string_view url);

// Percent-encodes everything but unreserved characters (RFC 3986).
std::string url_encode(std::string_view s);

// The message for a non-2xx answer: with an error body {"error": {"code", "message", "field"}},
// "server said 400 invalid_argument: MESSAGE (field F)"; otherwise "server said 502: " and the start
// of the body (or the status text when empty).
std::string format_server_error(int status, std::string_view body);

// ---- Durations on flags ----

// Integer seconds or a number with a unit s/m/h/d ("90m", "2h", "1d"); the error names `flag`.
Result<int64_t> parse_duration_flag(std::string_view text, const std::string& flag);

// ---- Mounts on flags ----

// `tessera submit --mount KIND=SOURCE:PATH[:ro|:rw]` (KIND dataset, volume or host; SOURCE up to the
// first ':') as a job spec mount: {"dataset"|"volume"|"host_path": SOURCE, "path": PATH, "read_only":
// true (ro), false (rw) or null (absent)}. The config layer checks names and paths; the error here
// names --mount and the expected form.
Result<nlohmann::json> parse_mount_flag(std::string_view text);

// ---- JSON access ----

// A field as display text: strings as-is, integers as digits, other numbers with one decimal,
// booleans as yes/no, missing or null as `missing`.
std::string json_text(const nlohmann::json& obj, const char* key, const std::string& missing = "-");
// An integer field, or nullopt when missing, null or not a number.
std::optional<int64_t> json_int(const nlohmann::json& obj, const char* key);

}  // namespace tessera::cli
