#include "server/event_kind.h"

#include <array>
#include <string_view>

namespace tessera::server {

namespace {

constexpr std::array<std::string_view, size_t(EventKind::kUnknown) + 1> kNames = {
    "submitted", "started", "priority_changed", "checkpoint_requested", "checkpoint_acknowledged", "spot_interrupted",
    "spot_avoided", "requeued", "held", "released", "signalled",
    "succeeded", "failed", "cancelled", "timed_out", "preempted", "lost", "interrupted",
    "node_ready", "node_registered", "node_not_ready", "node_cordon", "node_drain", "node_drained", "node_resume",
    "node_topology_mismatch", "node_interruption_notice", "interruption_notice_ignored", "mig_reconfigured", "node_leaving",
    "config_reloaded", "denied", "token_created", "token_revoked",
    "unknown",
};

}  // namespace

const char* event_kind_name(EventKind k) { return kNames[size_t(k)].data(); }

EventKind parse_event_kind(std::string_view name) {
  for (size_t i = 0; i < size_t(EventKind::kUnknown); ++i)
    if (kNames[i] == name) return EventKind(i);
  return EventKind::kUnknown;
}

bool ends_attempt(EventKind k) { return k >= EventKind::kSucceeded && k <= EventKind::kInterrupted; }

}  // namespace tessera::server
