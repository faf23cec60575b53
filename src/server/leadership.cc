// Standby waiting and lease keeping (leadership.h).
#include "server/leadership.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>

#include <spdlog/spdlog.h>

namespace tessera::server {

void step_down(const std::string& why) {
  spdlog::error("event=leadership_lost detail=\"{}\" (exiting; restarted, this controller comes back as a standby)", why);
  spdlog::default_logger()->flush();
  std::fflush(stdout);
  std::fflush(stderr);
  ::_exit(kLostLeadershipExit);
}

namespace {

// At most one line per 10 s while the database is away.
class Throttled {
 public:
  bool due() {
    const auto now = std::chrono::steady_clock::now();
    if (now - last_ < std::chrono::seconds(10)) return false;
    last_ = now;
    return true;
  }

 private:
  std::chrono::steady_clock::time_point last_{};
};

}  // namespace

bool wait_for_leadership(LeaderLease& lease, StandbyServer& standby, const sigset_t& signals, int64_t poll_ms,
                         int* signal) {
  std::string last_leader = "?";
  Throttled unreachable;
  for (;;) {
    auto won = lease.try_acquire();
    if (won.ok() && *won) return true;
    if (!won.ok() && unreachable.due()) spdlog::warn("event=lease_unreachable detail=\"{}\"", won.error().message);
    if (auto who = lease.current(); who.ok()) {
      standby.set_leader(*who);
      const std::string now = who->live ? who->url : "";
      if (now != last_leader)
        spdlog::info("event=standby leader=\"{}\" epoch={}", now.empty() ? "(none)" : now, who->epoch);
      last_leader = now;
    }
    timespec wait{time_t(poll_ms / 1000), long(poll_ms % 1000) * 1000000L};
    const int sig = sigtimedwait(&signals, nullptr, &wait);
    if (sig == SIGTERM || sig == SIGINT) {
      *signal = sig;
      return false;
    }
  }
}

LeaseKeeper::LeaseKeeper(LeaderLease& lease, int64_t interval_ms) {
  thread_ = std::thread([this, &lease, interval_ms] {
    Throttled unreachable;
    while (!stop_.load()) {
      auto kept = lease.renew();
      if (kept.ok() && !*kept)
        step_down("another controller took the lease (this one led epoch " + std::to_string(lease.epoch()) + ")");
      if (!kept.ok() && unreachable.due())
        spdlog::warn("event=lease_not_renewed detail=\"{}\"", kept.error().message);
      for (int64_t slept = 0; slept < interval_ms && !stop_.load(); slept += 20)
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  });
}

LeaseKeeper::~LeaseKeeper() {
  stop_ = true;
  thread_.join();
}

}  // namespace tessera::server
