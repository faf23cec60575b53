// The agent's log endpoint (log_server.h): the secret first, then every bad parameter a 400 naming
// it (limit=-5 used to be a 500), a missing log a 404, and byte ranges with the next offset.
#include "agent/log_server.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

namespace tessera::agent {
namespace {
namespace fs = std::filesystem;
using Params = std::multimap<std::string, std::string>;

TEST(LogSecret, OnlyTheExactSecretMatches) {
  EXPECT_TRUE(secret_matches("0123456789abcdef", "0123456789abcdef"));
  EXPECT_FALSE(secret_matches("0123456789abcdeF", "0123456789abcdef"));
  EXPECT_FALSE(secret_matches("0123456789abcde", "0123456789abcdef"));   // a prefix
  EXPECT_FALSE(secret_matches("0123456789abcdef0", "0123456789abcdef"));  // longer
  EXPECT_FALSE(secret_matches("", "0123456789abcdef"));
  EXPECT_FALSE(secret_matches("", ""));  // no secret set: nothing matches
  EXPECT_FALSE(secret_matches(std::string("0123456789abcdef\0", 17), "0123456789abcdef"));
}

TEST(LogQuery, EveryBadParameterIsNamed) {
  const Params ok{{"job", "3"}, {"attempt", "1"}, {"task", "0"}};
  auto q = parse_log_query(ok);
  ASSERT_TRUE(q.ok()) << q.error().message;
  EXPECT_EQ(q->job, 3);
  EXPECT_EQ(q->offset, 0);
  EXPECT_EQ(q->limit, kMaxLogChunk);
  struct Case {
    std::string key, value, named;
  };
  const Case cases[] = {{"limit", "-5", "limit"},   {"limit", "0", "limit"},       {"offset", "-1", "offset"},
                        {"job", "abc", "job"},      {"job", "12abc", "job"},       {"attempt", " 1", "attempt"},
                        {"task", "99999999999", "task"}, {"task", "+1", "task"},   {"offset", "1e3", "offset"},
                        {"limit", "99999999999999999999", "limit"}};
  for (const Case& c : cases) {
    Params p = ok;
    p.erase(c.key);
    p.emplace(c.key, c.value);
    auto r = parse_log_query(p);
    ASSERT_FALSE(r.ok()) << c.key << "=" << c.value;
    EXPECT_EQ(r.error().message.rfind(c.named + ":", 0), 0u) << r.error().message;
  }
  for (const char* key : {"job", "attempt", "task"}) {
    Params p = ok;
    p.erase(key);
    auto r = parse_log_query(p);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.error().message.find(std::string(key) + ": required"), std::string::npos);
  }
  Params twice = ok;
  twice.emplace("job", "4");
  EXPECT_FALSE(parse_log_query(twice).ok());
  Params big = ok;
  big.emplace("limit", "999999999");
  EXPECT_EQ(parse_log_query(big)->limit, kMaxLogChunk);  // capped, not refused
}

TEST(LogServe, SecretFirstThenParametersThenTheBytes) {
  char tmpl[] = "/tmp/tessera-log-test-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  fs::create_directories(fs::path(log_path(dir, 7, 2, 1)).parent_path());
  std::ofstream(log_path(dir, 7, 2, 1)) << "hello world\n";
  const std::string secret = "s3cret";
  const Params p{{"job", "7"}, {"attempt", "2"}, {"task", "1"}, {"offset", "6"}, {"limit", "3"}};
  auto r = serve_log(dir, secret, "wrong", p);
  EXPECT_EQ(r.status, 403);
  r = serve_log(dir, secret, secret, Params{{"job", "7"}, {"attempt", "2"}, {"task", "1"}, {"limit", "-5"}});
  EXPECT_EQ(r.status, 400);
  const auto err = nlohmann::json::parse(r.body, nullptr, false);
  ASSERT_TRUE(err.is_object()) << r.body;
  EXPECT_EQ(err.value("error", "").rfind("limit:", 0), 0u) << r.body;
  r = serve_log(dir, secret, secret, p);
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "wor");
  EXPECT_EQ(r.next_offset, 9);
  r = serve_log(dir, secret, secret, Params{{"job", "7"}, {"attempt", "2"}, {"task", "1"}, {"offset", "1000"}});
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "");
  EXPECT_EQ(r.next_offset, 12);  // the end
  r = serve_log(dir, secret, secret, Params{{"job", "8"}, {"attempt", "2"}, {"task", "1"}});
  EXPECT_EQ(r.status, 404);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace tessera::agent
