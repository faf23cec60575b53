#include "config/log_format.h"

#include <spdlog/pattern_formatter.h>
#include <spdlog/spdlog.h>

#include <memory>
#include <string_view>

#include "config/text.h"

namespace tessera::config {

namespace {

// %* : the message, escaped.
class EscapedMessage final : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& msg, const std::tm&, spdlog::memory_buf_t& dest) override {
    const std::string text = escape_for_log(std::string_view(msg.payload.data(), msg.payload.size()));
    dest.append(text.data(), text.data() + text.size());
  }
  std::unique_ptr<custom_flag_formatter> clone() const override { return std::make_unique<EscapedMessage>(); }
};

}  // namespace

void use_safe_log_format() {
  auto f = std::make_unique<spdlog::pattern_formatter>();
  f->add_flag<EscapedMessage>('*').set_pattern("%Y-%m-%dT%H:%M:%S.%e%z level=%l %*");
  spdlog::set_formatter(std::move(f));
}

}  // namespace tessera::config
