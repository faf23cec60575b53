// Text that crosses a trust boundary. Every string a client or agent sends is checked here before it
// reaches JSON (whose writer throws on invalid UTF-8) or a log line (where a newline would forge a
// line). Pure functions; thread-safe.
#pragma once

#include <string>
#include <string_view>

namespace tessera::config {

// Whether `s` is well-formed UTF-8 (RFC 3629: no overlong forms, no surrogates, at most U+10FFFF).
bool valid_utf8(std::string_view s);

// Whether `s` is valid UTF-8 free of control characters (C0, DEL): safe as a name or header value.
bool printable_utf8(std::string_view s);

// `s` for one log line: valid UTF-8 kept, control characters as \n, \r, \t or \xHH, bytes that are
// not UTF-8 as \xHH, and a backslash doubled. The result is always valid UTF-8 with no control
// characters, so a logged value can neither break the line nor the log's encoding.
std::string escape_for_log(std::string_view s);

// `s` cut to at most `max_bytes` bytes on a UTF-8 character boundary, with "..." appended when cut.
std::string truncate_utf8(std::string_view s, size_t max_bytes);

}  // namespace tessera::config
