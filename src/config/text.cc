#include "config/text.h"

#include <algorithm>
#include <cstdint>

namespace tessera::config {

namespace {

// Length of the well-formed UTF-8 sequence at s[i], or 0 when the bytes there are not one.
size_t utf8_sequence(std::string_view s, size_t i) {
  const auto b = [&](size_t k) { return static_cast<uint8_t>(s[k]); };
  const uint8_t c = b(i);
  if (c < 0x80) return 1;
  size_t n = 0;
  uint8_t lo = 0x80, hi = 0xBF;  // the allowed range of the second byte
  if (c >= 0xC2 && c <= 0xDF) n = 2;
  else if (c == 0xE0) n = 3, lo = 0xA0;
  else if (c >= 0xE1 && c <= 0xEC) n = 3;
  else if (c == 0xED) n = 3, hi = 0x9F;  // no UTF-16 surrogates
  else if (c >= 0xEE && c <= 0xEF) n = 3;
  else if (c == 0xF0) n = 4, lo = 0x90;
  else if (c >= 0xF1 && c <= 0xF3) n = 4;
  else if (c == 0xF4) n = 4, hi = 0x8F;  // at most U+10FFFF
  else return 0;
  if (i + n > s.size()) return 0;
  if (b(i + 1) < lo || b(i + 1) > hi) return 0;
  for (size_t k = 2; k < n; ++k)
    if (b(i + k) < 0x80 || b(i + k) > 0xBF) return 0;
  return n;
}

}  // namespace

bool valid_utf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    const size_t n = utf8_sequence(s, i);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

bool printable_utf8(std::string_view s) {
  for (char ch : s) {
    const auto c = static_cast<uint8_t>(ch);
    if (c < 0x20 || c == 0x7F) return false;
  }
  return valid_utf8(s);
}

std::string escape_for_log(std::string_view s) {
  static const char* hex = "0123456789abcdef";
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<uint8_t>(s[i]);
    const size_t n = utf8_sequence(s, i);
    if (n > 1) {
      out.append(s.substr(i, n));
      i += n;
      continue;
    }
    ++i;
    if (c == '\\') out += "\\\\";
    else if (c == '\n') out += "\\n";
    else if (c == '\r') out += "\\r";
    else if (c == '\t') out += "\\t";
    else if (n == 1 && c >= 0x20 && c != 0x7F) out += char(c);
    else out += {'\\', 'x', hex[c >> 4], hex[c & 15]};
  }
  return out;
}

std::string truncate_utf8(std::string_view s, size_t max_bytes) {
  if (s.size() <= max_bytes) return std::string(s);
  size_t end = 0;
  for (size_t i = 0; i < s.size();) {
    const size_t n = std::max<size_t>(1, utf8_sequence(s, i));
    if (i + n > max_bytes) break;
    i += n;
    end = i;
  }
  return std::string(s.substr(0, end)) + "...";
}

}  // namespace tessera::config
