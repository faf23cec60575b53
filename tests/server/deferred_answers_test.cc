// HttpServer's deferred answers (PostDeferred, HttpResponder): a request held open for a long poll
// holds no worker thread, is answered from another thread (directly or by a worker's fill), exactly
// once, and a held request is never stranded: a dropped responder answers 503, and so does stop().
#include <gtest/gtest.h>
#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <future>
#include <mutex>
#include <thread>
#include <vector>

#include "server/http_server.h"

namespace tessera::server {
namespace {

struct Held {
  std::mutex mu;
  std::vector<std::shared_ptr<HttpResponder>> open;
  size_t size() {
    std::lock_guard lock(mu);
    return open.size();
  }
  std::shared_ptr<HttpResponder> take() {
    std::lock_guard lock(mu);
    auto r = open.front();
    open.erase(open.begin());
    return r;
  }
};

bool wait_for(const std::function<bool()>& cond) {
  for (int i = 0; i < 500; ++i) {
    if (cond()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

std::future<httplib::Result> post_async(int port, const std::string& path) {
  return std::async(std::launch::async, [port, path] {
    httplib::Client c("127.0.0.1", port);
    c.set_read_timeout(10, 0);
    return c.Post(path, "{}", "application/json");
  });
}

TEST(DeferredAnswers, HeldRequestsTakeNoWorkerAndAreAnsweredFromAnyThread) {
  HttpServer server;
  Held held;
  server.PostDeferred("/hold", [&](const httplib::Request&, std::shared_ptr<HttpResponder> r) {
    std::lock_guard lock(held.mu);
    held.open.push_back(std::move(r));
  });
  server.Get("/ping", [](const httplib::Request&, httplib::Response& res) { res.set_content("pong", "text/plain"); });
  HttpServerOptions o;
  o.workers = 2;
  ASSERT_TRUE(server.start(o).ok());
  // More held requests than workers, and the server still answers others.
  std::vector<std::future<httplib::Result>> calls;
  for (int i = 0; i < 6; ++i) calls.push_back(post_async(server.port(), "/hold"));
  ASSERT_TRUE(wait_for([&] { return held.size() == 6; }));
  httplib::Client c("127.0.0.1", server.port());
  auto ping = c.Get("/ping");
  ASSERT_TRUE(ping);
  EXPECT_EQ(ping->body, "pong");
  // Answered directly, by a worker's fill, and once only.
  auto first = held.take();
  httplib::Response res;
  res.set_content("direct", "text/plain");
  EXPECT_TRUE(first->answer(res));
  EXPECT_FALSE(first->answer(res));
  EXPECT_TRUE(first->answered());
  auto second = held.take();
  std::thread([second] { second->answer_with([](httplib::Response& r) { r.set_content("filled", "text/plain"); }); }).join();
  EXPECT_FALSE(second->answer_with([](httplib::Response&) {}));
  // Dropped unanswered: 503.
  held.take().reset();
  std::vector<std::string> bodies;
  int unavailable = 0;
  std::vector<bool> done(calls.size(), false);
  ASSERT_TRUE(wait_for([&] {
    for (size_t i = 0; i < calls.size(); ++i) {
      if (done[i] || calls[i].wait_for(std::chrono::seconds(0)) != std::future_status::ready) continue;
      done[i] = true;
      auto r = calls[i].get();
      if (!r) continue;
      if (r->status == 503) ++unavailable;
      else bodies.push_back(r->body);
    }
    return std::count(done.begin(), done.end(), true) == 3;
  }));
  EXPECT_EQ(unavailable, 1);
  std::sort(bodies.begin(), bodies.end());
  EXPECT_EQ(bodies, (std::vector<std::string>{"direct", "filled"}));
  // stop() ends the three still held (503, or the connection closed as the server goes) and returns.
  server.stop();
  for (size_t i = 0; i < calls.size(); ++i) {
    if (done[i]) continue;
    EXPECT_EQ(calls[i].wait_for(std::chrono::seconds(5)), std::future_status::ready);
  }
  while (held.size() > 0) {
    httplib::Response late;
    EXPECT_FALSE(held.take()->answer(late));
  }
}

}  // namespace
}  // namespace tessera::server
