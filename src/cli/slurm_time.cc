// Slurm-style times and durations: see slurm_time.h. Pure; thread-safe.
#include "cli/slurm_time.h"

#include <array>
#include <cctype>
#include <charconv>
#include <cstdio>
#include <ctime>
#include <vector>

namespace tessera::cli {
namespace {

constexpr int64_t kMaxSeconds = int64_t(100) * 365 * 86400;  // a century: anything longer is a typo

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// All digits, fits: the value; else nullopt.
std::optional<int64_t> digits(std::string_view s) {
  if (s.empty() || s.size() > 12) return std::nullopt;
  int64_t v = 0;
  const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size()) return std::nullopt;
  return v;
}

std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  size_t start = 0;
  for (;;) {
    const size_t p = s.find(sep, start);
    out.push_back(s.substr(start, p == std::string_view::npos ? std::string_view::npos : p - start));
    if (p == std::string_view::npos) return out;
    start = p + 1;
  }
}

// "N" + unit (a letter or a word) as seconds; `bare_unit` is the unit of a bare number.
std::optional<int64_t> amount_with_unit(std::string_view s, int64_t bare_unit) {
  size_t i = 0;
  while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i;
  const auto n = digits(s.substr(0, i));
  if (!n) return std::nullopt;
  const std::string unit = lower(s.substr(i));
  int64_t mult = 0;
  if (unit.empty()) mult = bare_unit;
  else if (unit == "s" || unit == "sec" || unit == "secs" || unit == "second" || unit == "seconds") mult = 1;
  else if (unit == "m" || unit == "min" || unit == "mins" || unit == "minute" || unit == "minutes") mult = 60;
  else if (unit == "h" || unit == "hour" || unit == "hours") mult = 3600;
  else if (unit == "d" || unit == "day" || unit == "days") mult = 86400;
  else if (unit == "w" || unit == "week" || unit == "weeks") mult = 7 * 86400;
  else return std::nullopt;
  if (*n > kMaxSeconds / mult) return std::nullopt;
  return *n * mult;
}

// Local midnight of the day holding `t`, plus `day_offset` days, at hh:mm:ss.
int64_t local_at(int64_t t, int day_offset, int hh, int mm, int ss) {
  const std::time_t tt = static_cast<std::time_t>(t);
  std::tm tm{};
  localtime_r(&tt, &tm);
  tm.tm_mday += day_offset;
  tm.tm_hour = hh;
  tm.tm_min = mm;
  tm.tm_sec = ss;
  tm.tm_isdst = -1;
  return static_cast<int64_t>(std::mktime(&tm));
}

// "HH:MM" or "HH:MM:SS" as {h, m, s}.
std::optional<std::array<int, 3>> clock_time(std::string_view s) {
  const auto parts = split(s, ':');
  if (parts.size() < 2 || parts.size() > 3) return std::nullopt;
  std::array<int, 3> v{0, 0, 0};
  const int max[3] = {23, 59, 59};
  for (size_t i = 0; i < parts.size(); ++i) {
    if (parts[i].size() != 2 && !(i == 0 && parts[i].size() == 1)) return std::nullopt;
    const auto d = digits(parts[i]);
    if (!d || *d > max[i]) return std::nullopt;
    v[i] = static_cast<int>(*d);
  }
  return v;
}

}  // namespace

Result<int64_t> parse_time_limit(std::string_view text, const std::string& flag) {
  auto bad = [&](const std::string& why = "") {
    return invalid_argument(flag + ": '" + std::string(text) + "' is not a time limit" + (why.empty() ? "" : " (" + why + ")") +
                            "; use minutes (90), MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS (1-12:00:00), a number with "
                            "s/m/h/d (90m, 2h, 1d) or UNLIMITED");
  };
  const std::string l = lower(text);
  if (l == "unlimited" || l == "infinite") return int64_t(0);
  if (text.empty()) return bad();
  // A number with a unit letter.
  if (std::isalpha(static_cast<unsigned char>(text.back()))) {
    const auto v = amount_with_unit(text, 60);
    if (!v) return bad();
    if (*v == 0) return bad("a limit of 0 means none: say UNLIMITED");
    return *v;
  }
  int64_t days = 0;
  std::string_view rest = text;
  const bool has_days = rest.find('-') != std::string_view::npos;
  if (has_days) {
    const size_t dash = rest.find('-');
    const auto d = digits(rest.substr(0, dash));
    if (!d) return bad();
    days = *d;
    rest.remove_prefix(dash + 1);
  }
  const auto parts = split(rest, ':');
  std::vector<int64_t> v;
  for (std::string_view p : parts) {
    const auto d = digits(p);
    if (!d) return bad();
    v.push_back(*d);
  }
  int64_t secs = 0;
  if (has_days) {  // D-HH, D-HH:MM, D-HH:MM:SS
    if (v.size() > 3) return bad();
    const int64_t h = v[0], m = v.size() > 1 ? v[1] : 0, s = v.size() > 2 ? v[2] : 0;
    if (h > 23 || m > 59 || s > 59) return bad("hours 0..23, minutes and seconds 0..59 after D-");
    secs = days * 86400 + h * 3600 + m * 60 + s;
  } else if (v.size() == 1) {  // MM
    secs = v[0] * 60;
  } else if (v.size() == 2) {  // MM:SS
    if (v[1] > 59) return bad("seconds 0..59");
    secs = v[0] * 60 + v[1];
  } else if (v.size() == 3) {  // HH:MM:SS
    if (v[1] > 59 || v[2] > 59) return bad("minutes and seconds 0..59");
    secs = v[0] * 3600 + v[1] * 60 + v[2];
  } else {
    return bad();
  }
  if (secs > kMaxSeconds) return bad("longer than a century");
  if (secs == 0) return bad("a limit of 0 means none: say UNLIMITED");
  return secs;
}

std::optional<int64_t> parse_local_datetime(std::string_view text) {
  if (text.size() < 10) return std::nullopt;
  const auto date = split(text.substr(0, 10), '-');
  if (date.size() != 3 || date[0].size() != 4 || date[1].size() != 2 || date[2].size() != 2) return std::nullopt;
  const auto y = digits(date[0]), mo = digits(date[1]), d = digits(date[2]);
  if (!y || !mo || !d || *y < 1970 || *y > 9999 || *mo < 1 || *mo > 12 || *d < 1 || *d > 31) return std::nullopt;
  std::array<int, 3> hms{0, 0, 0};
  if (text.size() > 10) {
    if (text[10] != 'T' && text[10] != ' ') return std::nullopt;
    const auto c = clock_time(text.substr(11));
    if (!c) return std::nullopt;
    hms = *c;
  }
  std::tm tm{};
  tm.tm_year = static_cast<int>(*y) - 1900;
  tm.tm_mon = static_cast<int>(*mo) - 1;
  tm.tm_mday = static_cast<int>(*d);
  tm.tm_hour = hms[0];
  tm.tm_min = hms[1];
  tm.tm_sec = hms[2];
  tm.tm_isdst = -1;
  std::tm check = tm;
  const std::time_t t = std::mktime(&check);
  if (t == static_cast<std::time_t>(-1)) return std::nullopt;
  if (check.tm_mday != tm.tm_mday || check.tm_mon != tm.tm_mon) return std::nullopt;  // 2026-02-30
  return static_cast<int64_t>(t);
}

Result<int64_t> parse_begin_time(std::string_view text, int64_t now, const std::string& flag) {
  auto bad = [&] {
    return invalid_argument(flag + ": '" + std::string(text) +
                            "' is not a start time; use a local time 2026-12-24T18:00[:SS] or 2026-12-24, HH:MM (today or "
                            "tomorrow), now+2h / now+30m / now+90s / now+1d, today, tomorrow, midnight, noon or teatime");
  };
  const std::string l = lower(text);
  if (const auto t = parse_local_datetime(text)) return *t;
  if (const auto c = clock_time(text)) {
    const int64_t today = local_at(now, 0, (*c)[0], (*c)[1], (*c)[2]);
    return today > now ? today : local_at(now, 1, (*c)[0], (*c)[1], (*c)[2]);
  }
  if (l == "now") return now;
  if (l.rfind("now+", 0) == 0) {
    const auto d = amount_with_unit(std::string_view(text).substr(4), 1);
    if (!d) return bad();
    return now + *d;
  }
  if (l == "today") return local_at(now, 0, 0, 0, 0);
  if (l == "tomorrow") return local_at(now, 1, 0, 0, 0);
  const int hour = l == "midnight" ? 0 : l == "noon" ? 12 : l == "teatime" ? 16 : -1;
  if (hour >= 0) {
    const int64_t today = local_at(now, 0, hour, 0, 0);
    return today > now ? today : local_at(now, 1, hour, 0, 0);
  }
  return bad();
}

Result<int64_t> parse_past_time(std::string_view text, int64_t now, const std::string& flag) {
  auto bad = [&] {
    return invalid_argument(flag + ": '" + std::string(text) +
                            "' is not a time; use a local time 2026-12-24T18:00[:SS] or 2026-12-24, HH:MM, now, now-1d, or "
                            "a duration meaning that long ago (1d, 12h, 30m)");
  };
  const std::string l = lower(text);
  if (const auto t = parse_local_datetime(text)) return *t;
  if (const auto c = clock_time(text)) {
    const int64_t today = local_at(now, 0, (*c)[0], (*c)[1], (*c)[2]);
    return today <= now ? today : local_at(now, -1, (*c)[0], (*c)[1], (*c)[2]);
  }
  if (l == "now") return now;
  if (l.rfind("now-", 0) == 0) {
    const auto d = amount_with_unit(std::string_view(text).substr(4), 1);
    if (!d) return bad();
    return now - *d;
  }
  if (!text.empty() && std::isalpha(static_cast<unsigned char>(text.back()))) {
    const auto d = amount_with_unit(text, 1);
    if (d) return now - *d;
  }
  return bad();
}

std::string format_elapsed(int64_t seconds) {
  const int64_t s = seconds < 0 ? 0 : seconds;
  const int64_t d = s / 86400, h = (s % 86400) / 3600, m = (s % 3600) / 60, sec = s % 60;
  char buf[48];
  if (d > 0) std::snprintf(buf, sizeof buf, "%lld-%02lld:%02lld:%02lld", static_cast<long long>(d), static_cast<long long>(h),
                           static_cast<long long>(m), static_cast<long long>(sec));
  else std::snprintf(buf, sizeof buf, "%02lld:%02lld:%02lld", static_cast<long long>(h), static_cast<long long>(m),
                     static_cast<long long>(sec));
  return buf;
}

}  // namespace tessera::cli
