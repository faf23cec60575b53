// Slurm-style times (src/cli/slurm_time.h): --time limits, --begin start times, history's
// --since/--until, and sacct's elapsed format. Local times are checked in UTC (TZ set here).
#include <gtest/gtest.h>

#include <cstdlib>
#include <ctime>

#include "cli/slurm_time.h"

namespace tessera::cli {
namespace {

class SlurmTime : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* tz = std::getenv("TZ");
    saved_ = tz ? tz : "";
    had_ = tz != nullptr;
    setenv("TZ", "UTC", 1);
    tzset();
  }
  void TearDown() override {
    if (had_) setenv("TZ", saved_.c_str(), 1);
    else unsetenv("TZ");
    tzset();
  }
  // 2026-12-05 11:30:00 UTC
  static constexpr int64_t kNow = 1796470200;
  std::string saved_;
  bool had_ = false;
};

int64_t limit(const std::string& s) {
  auto r = parse_time_limit(s, "--time");
  EXPECT_TRUE(r.ok()) << s << ": " << (r.ok() ? "" : r.error().message);
  return r.ok() ? *r : -1;
}

TEST_F(SlurmTime, TimeLimitsInEverySlurmForm) {
  EXPECT_EQ(limit("90"), 90 * 60);                  // MM
  EXPECT_EQ(limit("5:30"), 5 * 60 + 30);            // MM:SS
  EXPECT_EQ(limit("02:00:00"), 2 * 3600);           // HH:MM:SS
  EXPECT_EQ(limit("1-12"), 36 * 3600);              // D-HH
  EXPECT_EQ(limit("1-12:30"), 36 * 3600 + 1800);    // D-HH:MM
  EXPECT_EQ(limit("2-00:00:10"), 2 * 86400 + 10);   // D-HH:MM:SS
  EXPECT_EQ(limit("90m"), 90 * 60);
  EXPECT_EQ(limit("2h"), 7200);
  EXPECT_EQ(limit("1d"), 86400);
  EXPECT_EQ(limit("45s"), 45);
  EXPECT_EQ(limit("UNLIMITED"), 0);
  EXPECT_EQ(limit("infinite"), 0);
  for (const char* bad : {"", "0", "abc", "1:2:3:4", "1-25", "1-1:60", "10:75", "-5", "1-", "2x", "0m"}) {
    auto r = parse_time_limit(bad, "--time");
    EXPECT_FALSE(r.ok()) << bad;
    if (!r.ok()) {
      EXPECT_EQ(r.error().message.rfind("--time: ", 0), 0u) << r.error().message;
    }
  }
}

TEST_F(SlurmTime, LocalDateTimes) {
  EXPECT_EQ(parse_local_datetime("2026-12-24T18:00"), 1798135200);
  EXPECT_EQ(parse_local_datetime("2026-12-24 18:00:30"), 1798135230);
  EXPECT_EQ(parse_local_datetime("2026-12-24"), 1798070400);
  EXPECT_FALSE(parse_local_datetime("2026-02-30"));
  EXPECT_FALSE(parse_local_datetime("2026-12-24T25:00"));
  EXPECT_FALSE(parse_local_datetime("24/12/2026"));
  EXPECT_FALSE(parse_local_datetime("2026-12-24X18:00"));
}

TEST_F(SlurmTime, BeginTimes) {
  auto begin = [](const std::string& s) {
    auto r = parse_begin_time(s, kNow, "--begin");
    EXPECT_TRUE(r.ok()) << s << ": " << (r.ok() ? "" : r.error().message);
    return r.ok() ? *r : -1;
  };
  EXPECT_EQ(begin("2026-12-24T18:00"), 1798135200);
  EXPECT_EQ(begin("now"), kNow);
  EXPECT_EQ(begin("now+2h"), kNow + 7200);
  EXPECT_EQ(begin("now+30m"), kNow + 1800);
  EXPECT_EQ(begin("now+90s"), kNow + 90);
  EXPECT_EQ(begin("now+1d"), kNow + 86400);
  EXPECT_EQ(begin("now+60"), kNow + 60);           // Slurm: a bare number is seconds
  EXPECT_EQ(begin("now+1hour"), kNow + 3600);
  EXPECT_EQ(begin("18:00"), 1796493600);           // today 18:00, still to come
  EXPECT_EQ(begin("09:15"), 1796462100 + 86400);   // 09:15 has passed: tomorrow
  EXPECT_EQ(begin("tomorrow"), 1796515200);
  EXPECT_EQ(begin("midnight"), 1796515200);
  EXPECT_EQ(begin("noon"), 1796472000);            // 12:00 today is still to come
  EXPECT_EQ(begin("teatime"), 1796486400);
  for (const char* bad : {"", "soon", "now+", "now+2y", "now-1h", "2026-13-01", "25:00"}) {
    auto r = parse_begin_time(bad, kNow, "--begin");
    EXPECT_FALSE(r.ok()) << bad;
    if (!r.ok()) {
      EXPECT_NE(r.error().message.find("now+2h"), std::string::npos) << r.error().message;
    }
  }
}

TEST_F(SlurmTime, PastTimesForHistoryWindows) {
  auto past = [](const std::string& s) {
    auto r = parse_past_time(s, kNow, "--since");
    EXPECT_TRUE(r.ok()) << s << ": " << (r.ok() ? "" : r.error().message);
    return r.ok() ? *r : -1;
  };
  EXPECT_EQ(past("1d"), kNow - 86400);
  EXPECT_EQ(past("12h"), kNow - 12 * 3600);
  EXPECT_EQ(past("now-30m"), kNow - 1800);
  EXPECT_EQ(past("now"), kNow);
  EXPECT_EQ(past("2026-12-01"), 1796083200);
  EXPECT_EQ(past("2026-12-05T09:00"), 1796461200);
  EXPECT_EQ(past("09:00"), 1796461200);            // today, already past
  EXPECT_EQ(past("18:00"), 1796493600 - 86400);    // still to come today: yesterday's
  for (const char* bad : {"", "yesterday-ish", "now+1d", "5"}) EXPECT_FALSE(parse_past_time(bad, kNow, "--since").ok()) << bad;
}

TEST_F(SlurmTime, ElapsedAsSacctShowsIt) {
  EXPECT_EQ(format_elapsed(5), "00:00:05");
  EXPECT_EQ(format_elapsed(3723), "01:02:03");
  EXPECT_EQ(format_elapsed(2 * 86400 + 3 * 3600), "2-03:00:00");
  EXPECT_EQ(format_elapsed(-3), "00:00:00");
}

}  // namespace
}  // namespace tessera::cli
