// Pure helpers of the client verbs: see format.h. No state; thread-safe.
#include "cli/format.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <ctime>

namespace tessera::cli {
namespace {

// Code points in a UTF-8 string (continuation bytes are not counted).
size_t display_width(std::string_view s) {
  size_t n = 0;
  for (unsigned char c : s)
    if ((c & 0xC0) != 0x80) ++n;
  return n;
}

// One decimal at most, rounded half away from zero: 1250/1000 -> "1.3", 16000/1000 -> "16".
std::string one_decimal(int64_t value, int64_t unit) {
  const bool neg = value < 0;
  const int64_t v = neg ? -value : value;
  const int64_t tenths = (v * 10 + unit / 2) / unit;
  std::string s = std::to_string(tenths / 10);
  if (tenths % 10) s += "." + std::to_string(tenths % 10);
  return neg ? "-" + s : s;
}

}  // namespace

std::vector<std::string> render_table_lines(const Table& t) {
  size_t ncols = t.headers.size();
  for (const auto& r : t.rows) ncols = std::max(ncols, r.size());
  std::vector<size_t> width(ncols, 0);
  auto cell = [](const std::vector<std::string>& row, size_t i) -> std::string_view {
    return i < row.size() ? std::string_view(row[i]) : std::string_view();
  };
  for (size_t i = 0; i < ncols; ++i) {
    width[i] = display_width(cell(t.headers, i));
    for (const auto& r : t.rows) width[i] = std::max(width[i], display_width(cell(r, i)));
  }
  auto render = [&](const std::vector<std::string>& row) {
    std::string line;
    for (size_t i = 0; i < ncols; ++i) {
      const std::string_view c = cell(row, i);
      const size_t pad = width[i] - display_width(c);
      const bool right = i < t.right_align.size() && t.right_align[i];
      if (i) line += "  ";
      if (right) line.append(pad, ' ');
      line += c;
      if (!right && i + 1 < ncols) line.append(pad, ' ');
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    return line;
  };
  std::vector<std::string> lines;
  lines.reserve(t.rows.size() + 1);
  lines.push_back(render(t.headers));
  for (const auto& r : t.rows) lines.push_back(render(r));
  return lines;
}

std::string render_table(const Table& t) {
  std::string out;
  for (const std::string& l : render_table_lines(t)) out += l + "\n";
  return out;
}

namespace {

std::string placement_text(const nlohmann::json& p) {
  std::vector<std::pair<std::string, int>> nodes;  // in task order, with their task counts
  std::string each;
  for (size_t i = 0; i < p.size(); ++i) {
    const nlohmann::json& t = p[i];
    if (!t.is_object()) continue;
    const std::string node = t.contains("node") && t["node"].is_string() ? t["node"].get<std::string>() : "?";
    if (nodes.empty() || nodes.back().first != node) nodes.emplace_back(node, 0);
    ++nodes.back().second;
    std::string gpus;
    for (const auto& g : t.value("gpus", nlohmann::json::array())) gpus += (gpus.empty() ? "" : ",") + g.dump();
    each += (each.empty() ? "" : "; ") + std::string("task ") + std::to_string(i) + " on " + node +
            (gpus.empty() ? "" : " GPU" + std::string(t["gpus"].size() > 1 ? "s " : " ") + gpus);
  }
  if (p.size() <= 4) return each;
  std::string out = std::to_string(p.size()) + " tasks on " + std::to_string(nodes.size()) + (nodes.size() == 1 ? " node: " : " nodes: ");
  for (size_t i = 0; i < nodes.size() && i < 6; ++i)
    out += (i ? ", " : "") + nodes[i].first + " (" + std::to_string(nodes[i].second) + ")";
  if (nodes.size() > 6) out += ", +" + std::to_string(nodes.size() - 6) + " more";
  return out;
}

}  // namespace

std::string compact_detail(const nlohmann::json& detail) {
  nlohmann::json d = detail;
  if (d.is_string()) {
    nlohmann::json parsed = nlohmann::json::parse(d.get<std::string>(), nullptr, /*allow_exceptions=*/false);
    if (parsed.is_object()) d = std::move(parsed);
    else return d.get<std::string>();
  }
  if (!d.is_object()) return d.is_null() ? "" : d.dump();
  std::string out;
  for (const auto& [k, v] : d.items()) {
    std::string text;
    if (k == "placement" && v.is_array()) text = placement_text(v);
    else if (v.is_string()) text = v.get<std::string>();
    else if (v.is_number_float()) text = json_text(d, k.c_str());
    else text = v.dump();
    out += (out.empty() ? "" : " ") + k + "=" + text;
  }
  return out;
}

std::string truncate(std::string_view s, size_t max) {
  if (display_width(s) <= max) return std::string(s);
  const size_t keep = max > 3 ? max - 3 : 0;
  std::string out;
  size_t n = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    const unsigned char c = s[i];
    if ((c & 0xC0) != 0x80) {
      if (n == keep) break;
      ++n;
    }
    out += s[i];
  }
  return out + "...";
}

std::string format_duration_short(int64_t seconds) {
  const int64_t s = std::max<int64_t>(seconds, 0);
  if (s < 60) return std::to_string(s) + "s";
  if (s < 3600) return std::to_string(s / 60) + "m";
  if (s < 86400) {
    const int64_t h = s / 3600, m = (s % 3600) / 60;
    return std::to_string(h) + "h" + (m ? std::to_string(m) + "m" : "");
  }
  const int64_t d = s / 86400, h = (s % 86400) / 3600;
  return std::to_string(d) + "d" + (h ? std::to_string(h) + "h" : "");
}

std::string format_relative(int64_t t, int64_t now) {
  const int64_t d = t - now;
  if (d >= -1 && d <= 1) return "now";
  return d > 0 ? "in " + format_duration_short(d) : format_duration_short(-d) + " ago";
}

std::string format_eta(std::optional<int64_t> estimated_start, int64_t now) {
  if (!estimated_start) return "-";
  if (*estimated_start <= now) return "now";
  return format_relative(*estimated_start, now);
}

std::string format_local_time(int64_t t) {
  if (t == 0) return "-";
  const std::time_t tt = static_cast<std::time_t>(t);
  std::tm tm{};
  localtime_r(&tt, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", &tm);
  return buf;
}

std::string format_gpus(int64_t milli) { return one_decimal(milli, 1000); }

std::string short_gpu_class(const std::string& name, const std::vector<std::string>& all) {
  auto lower = [](std::string s) {
    for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
  };
  auto prefix = [&](const std::string& s) { return lower(s.substr(0, s.find('-'))); };
  const std::string mine = prefix(name);
  if (mine.empty()) return lower(name);
  for (const std::string& other : all)
    if (other != name && prefix(other) == mine) return lower(name);
  return mine;
}

std::string format_class_amounts(const nlohmann::json& amounts, const std::vector<std::string>& all) {
  if (!amounts.is_object() || amounts.empty()) return "-";
  std::string out;
  for (const auto& [name, v] : amounts.items()) {
    if (!v.is_number()) continue;
    const int64_t milli = v.is_number_integer() ? v.get<int64_t>() : std::llround(v.get<double>());
    if (!out.empty()) out += ' ';
    out += short_gpu_class(name, all) + ":" + format_gpus(milli);
  }
  return out.empty() ? "-" : out;
}

std::string format_mib(int64_t mib) {
  constexpr int64_t kGi = 1024, kTi = 1024 * 1024;
  if (mib == 0) return "0";
  if (mib >= kTi) return one_decimal(mib, kTi) + "Ti";
  if (mib >= kGi) return one_decimal(mib, kGi) + "Gi";
  return std::to_string(mib) + "Mi";
}

std::string format_cores(int64_t milli) { return one_decimal(milli, 1000); }

std::string describe_resources(const nlohmann::json& r) {
  if (!r.is_object()) return "-";
  std::vector<std::string> parts;
  const std::string mig = json_text(r, "mig", "");
  const int64_t gpus = json_int(r, "gpus").value_or(0);
  const int64_t milli = json_int(r, "gpu_milli").value_or(1000);
  const auto gpu_mem = r.contains("gpu_memory") ? r["gpu_memory"] : nlohmann::json();
  const bool has_gpu_mem = (gpu_mem.is_number() && gpu_mem.get<double>() > 0) || (gpu_mem.is_string() && !gpu_mem.get<std::string>().empty());
  std::string models;
  if (r.contains("gpu_models") && r["gpu_models"].is_array())
    for (const auto& m : r["gpu_models"])
      if (m.is_string()) models += (models.empty() ? "" : ", ") + m.get<std::string>();
  if (!mig.empty()) {
    parts.push_back("MIG " + mig);
  } else if (milli < 1000 || has_gpu_mem) {
    const int64_t n = gpus > 0 ? gpus : 1;
    std::string share = milli < 1000 ? format_gpus(milli) + " of " : "a share of ";
    share += std::to_string(n) + (n == 1 ? " GPU" : " GPUs");
    if (!models.empty()) share += " (" + models + ")";
    parts.push_back(share);
    if (has_gpu_mem)
      parts.push_back((gpu_mem.is_number() ? format_mib(json_int(r, "gpu_memory").value_or(0)) : gpu_mem.get<std::string>()) +
                      " GPU memory");
  } else if (gpus > 0) {
    parts.push_back(std::to_string(gpus) + (gpus == 1 ? " GPU" : " GPUs") + (models.empty() ? "" : " (" + models + ")"));
  } else {
    parts.push_back("no GPU");
  }
  if (r.contains("cpu")) {
    const auto& c = r["cpu"];
    std::string cpu;
    if (c.is_number()) cpu = format_cores(json_int(r, "cpu").value_or(0) * 1000);
    else if (c.is_string()) {
      const std::string s = c.get<std::string>();
      int64_t m = 0;
      const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), m);
      cpu = (!s.empty() && s.back() == 'm' && ec == std::errc() && ptr == s.data() + s.size() - 1) ? format_cores(m) : s;
    }
    if (!cpu.empty() && cpu != "0") parts.push_back(cpu + " cpu");
  }
  if (r.contains("memory")) {
    const auto& m = r["memory"];
    std::string mem = m.is_number() ? format_mib(json_int(r, "memory").value_or(0)) : m.is_string() ? m.get<std::string>() : "";
    if (!mem.empty() && mem != "0") parts.push_back(mem + " memory");
  }
  std::string out;
  for (const std::string& p : parts) out += (out.empty() ? "" : ", ") + p;
  return out;
}

std::string render_gpu_map(const nlohmann::json& gpus) {
  if (!gpus.is_array() || gpus.empty()) return "-";
  std::string whole, mig;
  for (const auto& g : gpus) {
    if (!g.is_object()) continue;
    const bool healthy = g.value("health", std::string("healthy")) == "healthy";
    if (g.value("mig", false)) {
      std::string inst;
      if (g.contains("instances") && g["instances"].is_array())
        for (const auto& i : g["instances"]) {
          if (!inst.empty()) inst += '|';
          const std::string profile = i.value("profile", std::string("?"));
          inst += profile.substr(0, profile.find('.')) + ":";
          const auto job = json_int(i, "job");
          inst += job ? std::to_string(*job) : "-";
        }
      if (inst.empty()) inst = "-";
      if (!healthy) inst = "x " + inst;
      mig += " [" + inst + "]";
    } else {
      const int64_t used = json_int(g, "used_milli").value_or(0);
      whole += !healthy ? 'x' : used >= 1000 ? '#' : used > 0 ? '+' : '.';
    }
  }
  std::string out = whole.empty() ? "" : "[" + whole + "]";
  if (out.empty() && !mig.empty()) return mig.substr(1);
  return out + mig;
}

std::string ServerUrl::base() const {
  const bool v6 = host.find(':') != std::string::npos;
  return scheme + "://" + (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

Result<ServerUrl> parse_server_url(std::string_view url) {
  const std::string shown(url);
  auto bad = [&](const std::string& why) {
    return invalid_argument("--server '" + shown + "': " + why +
                            " (expected http://HOST:PORT, e.g. http://127.0.0.1:8420)");
  };
  std::string_view rest = url;
  ServerUrl out;
  if (const size_t p = rest.find("://"); p != std::string_view::npos) {
    const std::string scheme(rest.substr(0, p));
    if (scheme != "http" && scheme != "https") return bad("unknown scheme '" + scheme + "' (use http or https)");
    out.scheme = scheme;
    rest.remove_prefix(p + 3);
  }
  while (!rest.empty() && rest.back() == '/') rest.remove_suffix(1);
  if (rest.find('/') != std::string_view::npos) return bad("a path is not allowed; the API is always under /api/v1");
  if (rest.empty()) return bad("no host");
  std::string_view host = rest;
  if (rest.front() == '[') {  // [IPv6]:port
    const size_t close = rest.find(']');
    if (close == std::string_view::npos) return bad("unclosed '[' in the host");
    host = rest.substr(1, close - 1);
    rest.remove_prefix(close + 1);
    if (!rest.empty() && rest.front() != ':') return bad("unexpected text after ']'");
  } else if (const size_t c = rest.rfind(':'); c != std::string_view::npos) {
    host = rest.substr(0, c);
    rest.remove_prefix(c);
  } else {
    rest = {};
  }
  if (host.empty()) return bad("no host");
  out.host = std::string(host);
  if (!rest.empty()) {  // ":port"
    const std::string_view port = rest.substr(1);
    int p = 0;
    const auto [ptr, ec] = std::from_chars(port.data(), port.data() + port.size(), p);
    if (port.empty() || ec != std::errc() || ptr != port.data() + port.size() || p < 1 || p > 65535)
      return bad("the port must be a number in 1..65535");
    out.port = p;
  }
  return out;
}

std::string url_encode(std::string_view s) {
  static const char* kHex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

std::string format_server_error(int status, std::string_view body) {
  std::string out = "server said " + std::to_string(status);
  const auto j = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_object() && j.contains("error") && j["error"].is_object()) {
    const auto& e = j["error"];
    const std::string code = json_text(e, "code", ""), msg = json_text(e, "message", ""),
                      field = json_text(e, "field", "");
    if (!code.empty()) out += " " + code;
    if (!msg.empty()) out += ": " + msg;
    if (!field.empty()) out += " (field " + field + ")";
    return out;
  }
  std::string text(body.substr(0, 300));
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.pop_back();
  for (char& c : text)
    if (c == '\n' || c == '\r') c = ' ';
  if (text.empty()) {
    switch (status) {
      case 400: text = "bad request"; break;
      case 401: text = "unauthenticated"; break;
      case 403: text = "permission denied"; break;
      case 404: text = "not found"; break;
      case 409: text = "conflict"; break;
      case 413: text = "payload too large"; break;
      case 500: text = "internal server error"; break;
      default: text = "no body"; break;
    }
  }
  return out + ": " + text;
}

Result<int64_t> parse_duration_flag(std::string_view text, const std::string& flag) {
  auto bad = [&] {
    return invalid_argument(flag + ": '" + std::string(text) +
                            "' is not a duration; use seconds (3600) or a number with s/m/h/d (90m, 2h, 1d)");
  };
  if (text.empty()) return bad();
  int64_t unit = 1;
  std::string_view digits = text;
  switch (text.back()) {
    case 's': unit = 1; digits.remove_suffix(1); break;
    case 'm': unit = 60; digits.remove_suffix(1); break;
    case 'h': unit = 3600; digits.remove_suffix(1); break;
    case 'd': unit = 86400; digits.remove_suffix(1); break;
    default: break;
  }
  int64_t v = 0;
  const auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v);
  if (digits.empty() || ec != std::errc() || ptr != digits.data() + digits.size() || v < 0) return bad();
  if (v > INT64_MAX / unit) return bad();
  return v * unit;
}

Result<nlohmann::json> parse_mount_flag(std::string_view text) {
  auto bad = [&](const std::string& why) {
    return invalid_argument("--mount '" + std::string(text) + "': " + why +
                            "; expected KIND=SOURCE:PATH[:ro|:rw] with KIND dataset, volume or host "
                            "(e.g. --mount dataset=imagenet:/data, --mount volume=team-scratch:/scratch:rw)");
  };
  const size_t eq = text.find('=');
  if (eq == std::string_view::npos) return bad("no KIND=");
  const std::string_view kind = text.substr(0, eq);
  std::string key;
  if (kind == "dataset" || kind == "volume") key = std::string(kind);
  else if (kind == "host") key = "host_path";
  else return bad("unknown KIND '" + std::string(kind) + "'");
  std::string_view rest = text.substr(eq + 1);
  nlohmann::json read_only = nullptr;
  if (rest.size() >= 3 && (rest.substr(rest.size() - 3) == ":ro" || rest.substr(rest.size() - 3) == ":rw")) {
    read_only = rest.substr(rest.size() - 2) == "ro";
    rest.remove_suffix(3);
  }
  const size_t colon = rest.find(':');
  if (colon == std::string_view::npos) return bad("no ':' between SOURCE and PATH");
  const std::string_view source = rest.substr(0, colon), path = rest.substr(colon + 1);
  if (source.empty()) return bad("SOURCE is empty");
  if (path.empty()) return bad("PATH is empty");
  return nlohmann::json{{key, std::string(source)}, {"path", std::string(path)}, {"read_only", read_only}};
}

std::string json_text(const nlohmann::json& obj, const char* key, const std::string& missing) {
  if (!obj.is_object()) return missing;
  const auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return missing;
  if (it->is_string()) return it->get<std::string>();
  if (it->is_boolean()) return it->get<bool>() ? "yes" : "no";
  if (it->is_number_integer()) return std::to_string(it->get<int64_t>());
  if (it->is_number()) return one_decimal(std::llround(it->get<double>() * 10), 10);
  return it->dump();
}

std::optional<int64_t> json_int(const nlohmann::json& obj, const char* key) {
  if (!obj.is_object()) return std::nullopt;
  const auto it = obj.find(key);
  if (it == obj.end() || !it->is_number()) return std::nullopt;
  if (it->is_number_integer()) return it->get<int64_t>();
  return std::llround(it->get<double>());
}

}  // namespace tessera::cli
