// A controller's part in leader election (docs/ha.md), around LeaderLease: waiting as a standby until
// it takes the lease, and keeping the lease while it leads. A leader that finds the lease taken by
// another controller (after a pause, a partition, or a database outage longer than the lease) ends
// the process at once with exit status kLostLeadershipExit, as Kubernetes' controllers do: its
// in-memory state may be stale, the database already refuses its writes (fencing), and a restarted
// process comes back as a standby. Thread-safety: see each function.
#pragma once

#include <signal.h>

#include <atomic>
#include <cstdint>
#include <thread>

#include "server/leader_lease.h"
#include "server/standby.h"

namespace tessera::server {

constexpr int kLostLeadershipExit = 75;  // EX_TEMPFAIL: restart me (as a standby)

// Serves as a standby (redirecting to the leader it reads every poll_ms) until this controller takes
// the lease: true. False when one of `signals` arrives first (*signal says which). Errors of the
// database are logged and retried: a standby waits out an outage.
bool wait_for_leadership(LeaderLease& lease, StandbyServer& standby, const sigset_t& signals, int64_t poll_ms,
                         int* signal);

// Renews the lease every interval_ms on its own thread while it lives; ends the process
// (kLostLeadershipExit) when another controller has taken it. A database it cannot reach is logged
// and retried (the store refuses writes meanwhile once the lease has expired).
class LeaseKeeper {
 public:
  LeaseKeeper(LeaderLease& lease, int64_t interval_ms);
  ~LeaseKeeper();  // stops renewing (the lease stays until it expires or is released)
  LeaseKeeper(const LeaseKeeper&) = delete;
  LeaseKeeper& operator=(const LeaseKeeper&) = delete;

 private:
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// Ends the process because another controller leads (logged with `why`).
[[noreturn]] void step_down(const std::string& why);

}  // namespace tessera::server
