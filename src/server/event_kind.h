// The kinds of entries in the controller's event log (docs/server.md, "Durability and recovery"), as
// one enum. The store keeps each kind as its name (event_kind_name); readers of the log (accounting,
// metrics, tests) turn the name back into the enum once (parse_event_kind) and compare enums, never
// text. Pure; thread-safe.
#pragma once

#include <cstdint>
#include <string_view>

namespace tessera::server {

enum class EventKind : uint8_t {
  // A job's life.
  kSubmitted, kStarted, kPriorityChanged, kCheckpointRequested, kCheckpointAcknowledged, kSpotInterrupted,
  kSpotAvoided, kRequeued, kHeld, kReleased, kSignalled,
  // The end of an attempt (ends_attempt): the job's end, or a requeue's cause.
  kSucceeded, kFailed, kCancelled, kTimedOut, kPreempted, kLost,
  // Stopped by its user (requeue) or the operator (a planned stop): resumes, no restart or preemption counted.
  kInterrupted,
  // Nodes.
  kNodeReady, kNodeRegistered, kNodeNotReady, kNodeCordon, kNodeDrain, kNodeDrained, kNodeResume,
  kNodeTopologyMismatch, kNodeInterruptionNotice, kInterruptionNoticeIgnored, kMigReconfigured, kNodeLeaving,
  // The control plane.
  kConfigReloaded, kDenied, kTokenCreated, kTokenRevoked,
  // A name no release of this binary writes (a newer store, or a damaged row).
  kUnknown,
};

const char* event_kind_name(EventKind k);     // "submitted", "node_not_ready", ...
EventKind parse_event_kind(std::string_view name);  // kUnknown for any other text
// Does this kind end an attempt (a final state, or the cause of a requeue)?
bool ends_attempt(EventKind k);

}  // namespace tessera::server
