// The log line format of `tessera server` and `tessera agent`: one line per event,
// "TIME level=LEVEL MESSAGE", where MESSAGE is escaped (config::escape_for_log) as a whole, so a
// value a client chose (a node name with a newline, bytes that are not UTF-8) can neither forge a
// line nor break the log's encoding. Call once at start, before other threads log.
#pragma once

namespace tessera::config {

void use_safe_log_format();

}  // namespace tessera::config
