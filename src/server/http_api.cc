#include "server/http_api.h"
#include "server/route_groups.h"
#include "server/http_server.h"
#include "server/permissions.h"

#include "config/text.h"

#include <httplib.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <sstream>

namespace tessera::server {

namespace {

const char* code_name(ErrorCode c) {
  switch (c) {
    case ErrorCode::kInvalidArgument: return "invalid_argument";
    case ErrorCode::kNotFound: return "not_found";
    case ErrorCode::kFailedPrecondition: return "failed_precondition";
    case ErrorCode::kResourceExhausted: return "invalid_argument";
    case ErrorCode::kInternal: return "internal";
    case ErrorCode::kUnauthenticated: return "unauthenticated";
    case ErrorCode::kPermissionDenied: return "permission_denied";
    case ErrorCode::kUnavailable: return "unavailable";
  }
  return "internal";
}

// What the edge refuses before routing: a path, query parameter or header that is not UTF-8 (or, for
// the path and parameters, holds control characters). Nothing a client chose reaches JSON or a log
// unchecked. The message names the field.
std::optional<Error> refuse_text(const httplib::Request& req) {
  if (!config::printable_utf8(req.path)) return invalid_argument("path: must be printable UTF-8 once percent-decoded");
  for (const auto& [k, v] : req.params) {
    if (!config::printable_utf8(k)) return invalid_argument("query: parameter names must be printable UTF-8");
    if (!config::printable_utf8(v)) return invalid_argument(config::truncate_utf8(k, 64) + ": must be printable UTF-8");
  }
  for (const auto& [k, v] : req.headers) {
    if (!config::printable_utf8(k)) return invalid_argument("headers: header names must be printable UTF-8");
    if (!config::valid_utf8(v)) return invalid_argument(config::truncate_utf8(k, 64) + ": header value must be UTF-8");
  }
  return std::nullopt;
}

// The principal of the request's `Authorization: Bearer` token, or why there is none (401). Used
// before routing (so no unauthenticated body is read) and by every handler.
Result<Principal> bearer_principal(Controller& c, const httplib::Request& req) {
  const std::string h = req.get_header_value("Authorization");
  if (h.rfind("Bearer ", 0) != 0)
    return unauthenticated("Authorization: missing; send `Authorization: Bearer <token>` "
                           "(the first admin token is in DATA_DIR/admin.token)");
  auto p = c.tokens().find(h.substr(7));
  if (!p) return unauthenticated("Authorization: unknown or revoked token");
  return *p;
}

// "resources.gpus: must be >= 0" -> "resources.gpus" (a leading token made of path characters).
std::string field_of(const std::string& message) {
  const auto colon = message.find(": ");
  if (colon == std::string::npos || colon == 0) return "";
  for (size_t i = 0; i < colon; ++i) {
    const char c = message[i];
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '[' || c == ']' || c == '-'))
      return "";
  }
  return message.substr(0, colon);
}

void send_json(httplib::Response& res, int status, const Json& body) {
  res.status = status;
  res.set_content(body.dump(-1, ' ', false, Json::error_handler_t::replace), "application/json");
}

void send_error(httplib::Response& res, const Error& e) {
  res.status = http_status(e.code);
  res.set_content(error_body(e), "application/json");
}

void send_result(httplib::Response& res, const Result<Json>& r, int ok_status = 200) {
  if (r.ok())
    send_json(res, ok_status, *r);
  else
    send_error(res, r.error());
}

Result<int64_t> int_param(const httplib::Request& req, const std::string& name, int64_t fallback) {
  if (!req.has_param(name.c_str())) return fallback;
  const std::string v = req.get_param_value(name.c_str());
  char* end = nullptr;
  errno = 0;
  const long long x = std::strtoll(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0' || errno == ERANGE) return invalid_argument(name + ": must be an integer, got \"" + v + "\"");
  return int64_t(x);
}

// The job reference in the path: "12" or "12_3" (an array element).
Result<config::JobRef> path_ref(const httplib::Request& req) {
  auto ref = config::parse_job_ref(std::string(req.matches[1]));
  if (!ref.ok()) return invalid_argument("id: " + ref.error().message);
  return *ref;
}

// The job id in the path: a job id, or an array element's reference resolved to its id.
Result<int64_t> path_id(const httplib::Request& req, Controller& c) {
  auto ref = path_ref(req);
  if (!ref.ok()) return ref.error();
  if (ref->index < 0) return ref->id;
  return c.job_id(*ref);
}

// Request bodies are text (JSON or YAML): UTF-8 or refused.
Status utf8_body(const httplib::Request& req) {
  if (!config::valid_utf8(req.body)) return invalid_argument("body: not valid UTF-8");
  return {};
}

Result<Json> json_body(const httplib::Request& req) {
  if (Status st = utf8_body(req); !st.ok()) return st.error();
  if (req.body.empty()) return Json::object();
  Json j = Json::parse(req.body, nullptr, false);
  if (j.is_discarded()) return invalid_argument("body: not valid JSON");
  if (!j.is_object()) return invalid_argument("body: must be a JSON object");
  return j;
}

}  // namespace

void reply_json(httplib::Response& res, int status, const Json& body) { send_json(res, status, body); }
void reply_error(httplib::Response& res, const Error& e) { send_error(res, e); }

int http_status(ErrorCode code) {
  switch (code) {
    case ErrorCode::kInvalidArgument: return 400;
    case ErrorCode::kResourceExhausted: return 400;
    case ErrorCode::kNotFound: return 404;
    case ErrorCode::kFailedPrecondition: return 409;
    case ErrorCode::kUnauthenticated: return 401;
    case ErrorCode::kPermissionDenied: return 403;
    case ErrorCode::kUnavailable: return 503;
    case ErrorCode::kInternal: return 500;
  }
  return 500;
}

std::string error_body(const Error& e) {
  Json err{{"code", code_name(e.code)}, {"message", e.message}};
  if (std::string f = field_of(e.message); !f.empty()) err["field"] = f;
  return Json{{"error", err}}.dump(-1, ' ', false, Json::error_handler_t::replace);
}

HttpApi::HttpApi(Controller& controller, std::function<Status(const std::string&)> reload)
    : controller_(controller), reload_(std::move(reload)) {}

HttpApi::~HttpApi() { stop(); }

void HttpApi::stop() {
  if (agent_server_) agent_server_->stop();
  if (server_) server_->stop();
}

void HttpApi::configure(HttpServer& s) {
  s.set_error_body([](const httplib::Request&, httplib::Response& res) {
    if (res.status == 404)
      send_error(res, not_found("path: no such API endpoint; see docs/api.md"));
    else
      res.set_content(Json{{"error", {{"code", "http_" + std::to_string(res.status)}, {"message", "HTTP " + std::to_string(res.status)}}}}.dump(),
                      "application/json");
  });
  // Before routing, and before the body is read: refuse text that is not UTF-8, chunked bodies (every
  // client of ours sends Content-Length, which bounds the body before it is read), and API calls
  // without a known token, so that no unauthenticated body is ever buffered.
  Controller& c = controller_;
  s.set_pre_routing([&c](const httplib::Request& req, httplib::Response& res) {
    const auto refuse = [&res](int status, const Error& e) {
      send_error(res, e);
      res.status = status;
      return HttpServer::Hook::kAnswered;
    };
    if (auto e = refuse_text(req)) return refuse(400, *e);
    const std::string te = req.get_header_value("Transfer-Encoding");
    if (!te.empty() && te != "identity")
      return refuse(411, invalid_argument("Transfer-Encoding: chunked bodies are not accepted; send Content-Length"));
    if (req.path.rfind("/api/", 0) == 0) {
      if (auto p = bearer_principal(c, req); !p.ok()) return refuse(401, p.error());
    }
    return HttpServer::Hook::kContinue;
  });
  s.set_sent_observer(observe_request_sent);
  s.set_logger([](const httplib::Request& req, const httplib::Response& res, double seconds) {
    observe_request(req, res, seconds);
    if (spdlog::should_log(spdlog::level::debug))
      spdlog::debug("event=request method={} path={} status={} remote={}", req.method, req.path, res.status, req.remote_addr);
  });
}

HttpServerOptions api_listener_options(const HttpOptions& o) {
  HttpServerOptions so;
  so.host = o.host;
  so.port = o.port;
  so.workers = o.threads;
  so.max_body_bytes = o.max_body_bytes;
  so.max_connections = o.max_connections;
  so.max_connections_per_ip = o.max_connections_per_ip;
  so.idle_timeout_s = o.idle_timeout_s;
  return so;
}

HttpServerOptions agent_listener_options(const HttpOptions& o) {
  HttpServerOptions ao = api_listener_options(o);
  ao.host = o.agent_host.empty() ? o.host : o.agent_host;
  ao.port = o.agent_port;
  ao.workers = std::max(2, o.threads / 4);
  ao.max_connections_per_ip = 0;
  if (o.agent_max_connections > 0) ao.max_connections = o.agent_max_connections;
  // An agent's requests carry a few small headers, and every agent holds a watch open: a smaller
  // per-connection pool keeps thousands of open watches cheap (the body is streamed, not pooled).
  ao.header_memory_bytes = 16 << 10;
  return ao;
}

Status HttpApi::start(const HttpOptions& o) {
  server_ = std::make_unique<HttpServer>();
  configure(*server_);
  routes(*server_);
  if (Status st = server_->start(api_listener_options(o)); !st.ok()) return st;
  port_ = server_->port();
  if (o.agent_port >= 0) {
    // Agents' own listener: their heartbeats never wait behind users' requests or connections.
    agent_server_ = std::make_unique<HttpServer>();
    configure(*agent_server_);
    agent_routes(*agent_server_);
    if (Status st = agent_server_->start(agent_listener_options(o)); !st.ok())
      return invalid_argument("--agent-listen: " + st.message());
    agent_port_ = agent_server_->port();
  }
  return {};
}

void HttpApi::agent_routes(HttpServer& s) {
  Controller& c = controller_;
  auto auth = authenticator();
  s.Get("/healthz", [&c](const httplib::Request&, httplib::Response& res) { send_json(res, 200, c.health()); });
  // Ready: this controller leads (a standby answers 503 there: standby.h).
  s.Get("/readyz", [](const httplib::Request&, httplib::Response& res) {
    send_json(res, 200, Json{{"ready", true}, {"role", "leader"}});
  });
  // A JSON call the controller answers later (`call` hands its result to `done`): the request holds no
  // server thread meanwhile, and the answer is encoded on a worker, not on the thread that has it.
  using AsyncCall = void (Controller::*)(const Principal&, const Json&, std::function<void(Result<Json>)>);
  auto deferred = [&s, auth, &c](const std::string& path, AsyncCall call) {
    s.PostDeferred(path, [auth, &c, call](const httplib::Request& req, std::shared_ptr<HttpResponder> out) {
      httplib::Response res;
      auto p = auth(req, res);
      if (!p) return (void)out->answer(std::move(res));
      auto body = json_body(req);
      if (!body.ok()) return send_error(res, body.error()), (void)out->answer(std::move(res));
      (c.*call)(*p, *body, [out](Result<Json> r) {
        out->answer_with([r = std::move(r)](httplib::Response& res) { send_result(res, r); });
      });
    });
  };
  // Answered when the report is applied (and its changes durable).
  deferred("/api/v1/agent/heartbeat", &Controller::agent_heartbeat_async);
  // A long poll, answered once there is something to tell the node or its wait ends.
  deferred("/api/v1/agent/watch", &Controller::agent_watch);
  s.Post("/api/v1/agent/register", [auth, &c](const httplib::Request& req, httplib::Response& res) {
    auto p = auth(req, res);
    if (!p) return;
    auto body = json_body(req);
    if (!body.ok()) return send_error(res, body.error());
    send_result(res, c.agent_register(*p, *body));
  });
}

Authenticator HttpApi::authenticator() {
  Controller& c = controller_;
  // Authentication: the principal of the request's bearer token, or an error already sent.
  return [&c](const httplib::Request& req, httplib::Response& res) -> std::optional<Principal> {
    auto p = bearer_principal(c, req);
    if (!p.ok()) {
      send_error(res, p.error());
      return std::nullopt;
    }
    if (Status st = perm::may_call(*p, req.path); !st.ok()) {
      c.audit_denied(*p, req.method + " " + req.path, st.message());
      send_error(res, st.error());
      return std::nullopt;
    }
    return *p;
  };
}

void HttpApi::routes(HttpServer& s) {
  Controller& c = controller_;
  auto auth = authenticator();
  agent_routes(s);

  // Admin-only calls: anyone else gets 403 and an audit entry.
  auto admin_only = [&c](const Principal& p, const std::string& what, httplib::Response& res) {
    Status st = perm::admin_only(p, what);
    if (st.ok()) return true;
    c.audit_denied(p, what, st.message());
    send_error(res, st.error());
    return false;
  };

  s.Get("/api/v1/whoami", [auth](const httplib::Request& req, httplib::Response& res) {
    auto p = auth(req, res);
    if (!p) return;
    send_json(res, 200, Json{{"user", p->user}, {"role", role_name(p->role)}, {"queue", p->queue}});
  });

  s.Post("/api/v1/jobs", [auth, &c](const httplib::Request& req, httplib::Response& res) {
    auto p = auth(req, res);
    if (!p) return;
    const std::string type = req.get_header_value("Content-Type");
    const bool yaml = type.find("yaml") != std::string::npos;
    // curl -d sends form encoding by default: treat it as JSON too.
    if (!type.empty() && !yaml && type.find("json") == std::string::npos &&
        type.find("x-www-form-urlencoded") == std::string::npos) {
      res.status = 415;
      res.set_content(Json{{"error", {{"code", "unsupported_media_type"},
                                      {"message", "Content-Type: send application/json or application/yaml"}}}}.dump(),
                      "application/json");
      return;
    }
    if (Status st = utf8_body(req); !st.ok()) return send_error(res, st.error());
    auto spec = yaml ? config::parse_job_spec_yaml(req.body) : config::parse_job_spec_json(req.body);
    if (!spec.ok()) return send_error(res, spec.error());
    const std::string key = req.get_header_value("Idempotency-Key");
    if (key.size() > 128) return send_error(res, invalid_argument("Idempotency-Key: at most 128 characters"));
    bool created = false;
    auto r = c.submit(*p, std::move(*spec), key, &created);
    send_result(res, r, created ? 201 : 200);
  });

  s.Get("/api/v1/jobs", [auth, &c](const httplib::Request& req, httplib::Response& res) {
    auto p = auth(req, res);
    if (!p) return;
    JobFilter f;
    f.queue = req.get_param_value("queue");
    f.user = req.get_param_value("user");
    if (req.has_param("state")) {
      std::stringstream ss(req.get_param_value("state"));
      for (std::string st; std::getline(ss, st, ',');)
        if (!st.empty()) f.states.push_back(st);
    }
    f.active_only = req.get_param_value("active") == "true";
    f.name = req.get_param_value("name");
    for (auto [key, field] : {std::pair<const char*, int64_t*>{"array", &f.array}, {"finished_after", &f.finished_after},
                              {"finished_before", &f.finished_before}}) {
      if (!req.has_param(key)) continue;
      auto v = int_param(req, key, 0);
      if (!v.ok()) return send_error(res, v.error());
      if (*v < 0) return send_error(res, invalid_argument(std::string(key) + ": must be >= 0"));
      *field = *v;
    }
    auto limit = int_param(req, "limit", 100);
    auto after = int_param(req, "after", 0);
    if (!limit.ok()) return send_error(res, limit.error());
    if (!after.ok()) return send_error(res, after.error());
    if (*limit < 1 || *limit > 1000) return send_error(res, invalid_argument("limit: must be 1..1000"));
    f.limit = *limit;
    f.after = *after;
    send_result(res, c.list_jobs(*p, f));
  });

  s.Get(R"(/api/v1/jobs/([^/]+))", [auth, &c](const httplib::Request& req, httplib::Response& res) {
    auto p = auth(req, res);
    if (!p) return;
    auto id = path_id(req, c);
    if (!id.ok()) return send_error(res, id.error());
    send_result(res, c.show_job(*p, *id));
  });

  // Verbs on a job reference (an array job id: every element).
  auto verb = [auth, &c](JobVerb v) {
    return [auth, &c, v](const httplib::Request& req, httplib::Response& res) {
      auto p = auth(req, res);
      if (!p) return;
      auto ref = path_ref(req);
      if (!ref.ok()) return send_error(res, ref.error());
      bool hold = false;
      std::string signal;
      if ((v == JobVerb::kRequeue && !req.body.empty()) || v == JobVerb::kSignal) {
        auto body = json_body(req);
        if (!body.ok()) return send_error(res, body.error());
        if (body->is_object() && body->contains("hold")) {
          if (!(*body)["hold"].is_boolean()) return send_error(res, invalid_argument("hold: must be true or false"));
          hold = (*body)["hold"].get<bool>();
        }
        if (v == JobVerb::kSignal) {
          if (!body->is_object() || !body->contains("signal") || !(*body)["signal"].is_string())
            return send_error(res, invalid_argument("signal: required string, e.g. {\"signal\": \"USR1\"}"));
          signal = (*body)["signal"].get<std::string>();
        }
      }
      send_result(res, c.job_verb(*p, *ref, v, hold, signal));
    };
  };
  s.Post(R"(/api/v1/jobs/([^/]+)/cancel)", verb(JobVerb::kCancel));
  s.Delete(R"(/api/v1/jobs/([^/]+))", verb(JobVerb::kCancel));
  s.Post(R"(/api/v1/jobs/([^/]+)/hold)", verb(JobVerb::kHold));
  s.Post(R"(/api/v1/jobs/([^/]+)/release)", verb(JobVerb::kRelease));
  s.Post(R"(/api/v1/jobs/([^/]+)/requeue)", verb(JobVerb::kRequeue));
  s.Post(R"(/api/v1/jobs/([^/]+)/signal)", verb(JobVerb::kSignal));

  s.Post(R"(/api/v1/jobs/([^/]+)/priority)", [auth, &c](const httplib::Request& req, httplib::Response& res) {
    auto p = auth(req, res);
    if (!p) return;
    auto id = path_id(req, c);
    if (!id.ok()) return send_error(res, id.error());
    auto body = json_body(req);
    if (!body.ok()) return send_error(res, body.error());
    if (!body->contains("priority_class") || !(*body)["priority_class"].is_string())
      return send_error(res, invalid_argument("priority_class: required string, e.g. {\"priority_class\": \"research\"}"));
    send_result(res, c.set_priority(*p, *id, (*body)["priority_class"]));
  });

  s.Get("/api/v1/queues", [auth, &c](const httplib::Request& req, httplib::Response& res) {
    auto p = auth(req, res);
    if (!p) return;
    send_result(res, c.queues(*p));
  });
  s.Get("/api/v1/nodes", [auth, &c](const httplib::Request& req, httplib::Response& res) {
    auto p = auth(req, res);
    if (!p) return;
    send_result(res, c.nodes(*p));
  });
  s.Post(R"(/api/v1/nodes/([^/]+)/(cordon|drain|resume))", [auth, &c](const httplib::Request& req, httplib::Response& res) {
    auto p = auth(req, res);
    if (!p) return;
    auto body = json_body(req);
    if (!body.ok()) return send_error(res, body.error());
    std::string reason;
    if (body->contains("reason")) {
      if (!(*body)["reason"].is_string()) return send_error(res, invalid_argument("reason: must be a string"));
      reason = (*body)["reason"];
    }
    send_result(res, c.node_op(*p, req.matches[1], req.matches[2], reason));
  });

  s.Post(R"(/api/v1/nodes/([^/]+)/interruption)", [auth, &c](const httplib::Request& req, httplib::Response& res) {
    auto p = auth(req, res);
    if (!p) return;
    auto body = json_body(req);
    if (!body.ok()) return send_error(res, body.error());
    int64_t v[2] = {-1, -1};
    const char* keys[2] = {"notice_s", "reclaim_at"};
    for (int i = 0; i < 2; ++i) {
      if (!body->contains(keys[i])) continue;
      const Json& x = (*body)[keys[i]];
      if (!x.is_number_integer() || x.get<int64_t>() < 0 || (i == 0 && x.get<int64_t>() > 86400))
        return send_error(res, invalid_argument(std::string(keys[i]) + (i == 0 ? ": must be seconds 0..86400, e.g. {\"notice_s\": 120}"
                                                                               : ": must be unix seconds, e.g. {\"reclaim_at\": 1767225600}")));
      v[i] = x.get<int64_t>();
    }
    if (v[0] >= 0 && v[1] >= 0) return send_error(res, invalid_argument("notice_s, reclaim_at: give one of them, not both"));
    for (auto it = body->begin(); it != body->end(); ++it)
      if (it.key() != "notice_s" && it.key() != "reclaim_at")
        return send_error(res, invalid_argument(it.key() + ": unknown field; expected notice_s or reclaim_at"));
    send_result(res, c.node_interrupt(*p, req.matches[1], v[0], v[1]));
  });

  s.Post("/api/v1/tokens", [auth, &c](const httplib::Request& req, httplib::Response& res) {
    auto p = auth(req, res);
    if (!p) return;
    auto body = json_body(req);
    if (!body.ok()) return send_error(res, body.error());
    for (const char* k : {"user", "role", "queue", "node"})
      if (body->contains(k) && !(*body)[k].is_string()) return send_error(res, invalid_argument(std::string(k) + ": must be a string"));
    send_result(res, c.create_token(*p, body->value("user", ""), body->value("role", ""), body->value("queue", ""), body->value("node", "")),
                201);
  });
  s.Get("/api/v1/tokens", [auth, &c](const httplib::Request& req, httplib::Response& res) {
    auto p = auth(req, res);
    if (!p) return;
    send_result(res, c.list_tokens(*p));
  });
  auto revoke = [auth, &c](const httplib::Request& req, httplib::Response& res) {
    auto p = auth(req, res);
    if (!p) return;
    send_result(res, c.revoke_token(*p, req.matches[1]));
  };
  s.Delete(R"(/api/v1/tokens/([^/]+))", revoke);
  s.Post(R"(/api/v1/tokens/([^/]+)/revoke)", revoke);
  s.Get("/api/v1/events", [auth, &c](const httplib::Request& req, httplib::Response& res) {
    auto p = auth(req, res);
    if (!p) return;
    auto after = int_param(req, "after", 0);
    auto limit = int_param(req, "limit", 1000);
    if (!after.ok()) return send_error(res, after.error());
    if (!limit.ok()) return send_error(res, limit.error());
    send_result(res, c.events(*p, *after, *limit));
  });

  s.Get("/api/v1/admin/backup", [auth, admin_only, &c](const httplib::Request& req, httplib::Response& res) {
    auto p = auth(req, res);
    if (!p) return;
    if (!admin_only(*p, "take backups", res)) return;
    char dir[] = "/tmp/tessera-backup-XXXXXX";
    if (!mkdtemp(dir)) return send_error(res, internal_error("backup: cannot create a temporary directory in /tmp"));
    const std::string path = std::string(dir) + "/tessera.db";
    Status st = c.store().backup(path);
    std::string bytes;
    if (st.ok()) {
      std::ifstream in(path, std::ios::binary);
      std::stringstream ss;
      ss << in.rdbuf();
      bytes = ss.str();
    }
    std::remove(path.c_str());
    rmdir(dir);
    if (!st.ok()) return send_error(res, st.error());
    res.status = 200;
    res.set_content(std::move(bytes), "application/octet-stream");
  });

  s.Post("/api/v1/admin/reload", [this, auth, admin_only](const httplib::Request& req, httplib::Response& res) {
    auto p = auth(req, res);
    if (!p) return;
    if (!admin_only(*p, "reload the config", res)) return;
    Status st = reload_(p->user);
    if (!st.ok()) return send_error(res, st.error());
    send_json(res, 200, Json{{"reloaded", true}});
  });

  // Logs live on the node that ran the task: the controller fetches them from its agent.
  // ?task=N (default 0) &offset=BYTES (default 0) &limit=BYTES (default and at most 1 MiB).
  // Answers the bytes, with X-Tessera-Next-Offset (where to continue) and X-Tessera-Attempt.
  s.Get(R"(/api/v1/jobs/([^/]+)/logs)", [auth, &c](const httplib::Request& req, httplib::Response& res) {
    auto p = auth(req, res);
    if (!p) return;
    auto id = path_id(req, c);
    if (!id.ok()) return send_error(res, id.error());
    auto task = int_param(req, "task", 0), offset = int_param(req, "offset", 0), limit = int_param(req, "limit", 1 << 20);
    auto attempt = int_param(req, "attempt", 0);
    if (!task.ok()) return send_error(res, task.error());
    if (!attempt.ok()) return send_error(res, attempt.error());
    if (*attempt < 0) return send_error(res, invalid_argument("attempt: must be an attempt number (1, 2, ...)"));
    if (!offset.ok()) return send_error(res, offset.error());
    if (!limit.ok()) return send_error(res, limit.error());
    if (*task < 0) return send_error(res, invalid_argument("task: must be a task index (0, 1, ...)"));
    if (*offset < 0) return send_error(res, invalid_argument("offset: must be a byte offset >= 0"));
    if (*limit <= 0 || *limit > (1 << 20)) return send_error(res, invalid_argument("limit: must be 1..1048576 bytes"));
    auto src = c.log_source(*p, *id, int(*task), *attempt);
    if (!src.ok()) return send_error(res, src.error());
    httplib::Client agent((*src)["address"].get<std::string>(), (*src)["log_port"].get<int>());
    agent.set_connection_timeout(3, 0);
    agent.set_read_timeout(10, 0);
    const std::string path = "/logs?job=" + std::to_string(*id) + "&attempt=" + std::to_string((*src)["attempt"].get<int64_t>()) +
                             "&task=" + std::to_string(*task) + "&offset=" + std::to_string(*offset) +
                             "&limit=" + std::to_string(*limit);
    auto r = agent.Get(path, httplib::Headers{{"X-Tessera-Log-Secret", (*src)["log_secret"].get<std::string>()}});
    if (!r)
      return send_error(res, Error{ErrorCode::kUnavailable, "node " + (*src)["node"].get<std::string>() +
                                                              ": its agent's log server did not answer (" +
                                                              httplib::to_string(r.error()) + "); retry"});
    if (r->status != 200) {
      Json e = Json::parse(r->body, nullptr, false);
      const std::string why = e.is_object() ? e.value("error", r->body) : r->body;
      return send_error(res, r->status == 404 ? not_found("logs: " + why) : Error{ErrorCode::kUnavailable, "logs: " + why});
    }
    res.status = 200;
    res.set_header("X-Tessera-Next-Offset", r->get_header_value("X-Tessera-Next-Offset"));
    res.set_header("X-Tessera-Attempt", std::to_string((*src)["attempt"].get<int64_t>()));
    res.set_header("X-Tessera-Node", (*src)["node"].get<std::string>());
    res.set_content(r->body, "text/plain; charset=utf-8");
  });

  // Route groups in their own files (route_groups.h).
  register_report_routes(s, c, auth);

  register_metrics_routes(s, c, auth);

  register_portal_routes(s);
}

}  // namespace tessera::server
