// Controller: API tokens (create, revoke, list) and the event log.
#include "server/controller_state.h"

namespace tessera::server {

Result<Json> Controller::create_token(const Principal& who, const std::string& user, const std::string& role_text,
                                      const std::string& queue, const std::string& node) {
  auto role = parse_role(role_text);
  if (!role.ok()) return role.error();
  if (user.empty()) return invalid_argument("user: required");
  if (*role == Role::kAgent && node.empty())
    return invalid_argument("node: required for agent tokens: the node it speaks for, or a pattern such as gpu-* (* for every node)");
  if (*role != Role::kAgent && !node.empty()) return invalid_argument("node: only agent tokens are bound to a node");
  return answer<Json>([=, this](State& s, const Reply& reply) {
    if (Status st = perm::admin_only(who, "create tokens"); !st.ok()) {
      s.deny(who, "create token", st.message());
      return reply->set_value(st.error());
    }
    const bool scoped = *role == Role::kTeamLead || *role == Role::kMember;
    if (scoped && !s.tree->find(queue).ok()) {
      reply->set_value(invalid_argument("queue: " + std::string(role_name(*role)) + " tokens need a known queue (got \"" + queue + "\")"));
      return;
    }
    if (!scoped && !queue.empty()) {
      reply->set_value(invalid_argument("queue: only team-lead and member tokens have a queue"));
      return;
    }
    const std::string token = new_token();
    TokenRow row{sha256_hex(token), user, role_name(*role), queue, s.now(), false, node};
    WriteBatch b;
    b.tokens.push_back(row);
    Json detail{{"user", user}, {"role", row.role}, {"queue", queue}};
    if (!node.empty()) detail["node"] = node;
    b.events.push_back(s.event(0, EventKind::kTokenCreated, who.user, std::move(detail)));
    Controller* self = s.self;
    s.persist(std::move(b), [self, reply, row, token](Status st) {
      if (!st.ok()) {
        reply->set_value(store_failure(st, "the token was not created"));
        return;
      }
      self->tokens_.add(row);
      Json answer{{"token", token}, {"user", row.user}, {"role", row.role}, {"queue", row.queue}};
      if (!row.node.empty()) answer["node"] = row.node;
      reply->set_value(answer);
    });
  });
}

Result<Json> Controller::revoke_token(const Principal& who, const std::string& id) {
  if (id.size() < 6 || id.size() > 64 || id.find_first_not_of("0123456789abcdef") != std::string::npos)
    return invalid_argument("id: a token id is 6 to 64 lowercase hex digits, as `tessera token list` shows");
  return answer<Json>([=, this](State& s, const Reply& reply) {
    if (Status st = perm::admin_only(who, "revoke tokens"); !st.ok()) {
      s.deny(who, "revoke token", st.message());
      return reply->set_value(st.error());
    }
    std::vector<TokenRow> match;
    int active_admins = 0;
    for (const TokenRow& r : tokens_.list()) {
      if (r.hash.rfind(id, 0) == 0) match.push_back(r);
      active_admins += r.role == "admin" && !r.revoked;
    }
    if (match.empty()) return reply->set_value(not_found("id: no token " + id + "; `tessera token list` shows them"));
    if (match.size() > 1) return reply->set_value(failed_precondition("id: " + id + " names " + std::to_string(match.size()) + " tokens; give more digits"));
    TokenRow row = match[0];
    if (row.revoked) return reply->set_value(Json{{"id", row.hash.substr(0, 12)}, {"user", row.user}, {"revoked", true}});
    if (row.role == "admin" && active_admins <= 1)
      return reply->set_value(failed_precondition("id: " + id + " is the last admin token; create another admin token first"));
    row.revoked = true;
    WriteBatch b;
    b.tokens.push_back(row);
    b.events.push_back(s.event(0, EventKind::kTokenRevoked, who.user, Json{{"id", row.hash.substr(0, 12)}, {"user", row.user}, {"role", row.role}}));
    Controller* self = s.self;
    s.persist(std::move(b), [self, reply, row](Status st) {
      if (!st.ok()) return reply->set_value(store_failure(st, "the token was not revoked"));
      self->tokens_.add(row);  // in force for the next request
      reply->set_value(Json{{"id", row.hash.substr(0, 12)}, {"user", row.user}, {"role", row.role}, {"revoked", true}});
    });
  });
}

Result<Json> Controller::list_tokens(const Principal& who) {
  if (Status st = perm::admin_only(who, "list tokens"); !st.ok()) {
    audit_denied(who, "list tokens", st.message());
    return st.error();
  }
  Json out = Json::array();
  for (const TokenRow& r : tokens_.list())
    out.push_back(Json{{"id", r.hash.substr(0, 12)}, {"user", r.user}, {"role", r.role}, {"queue", r.queue},
                       {"node", r.role == "agent" ? (r.node.empty() ? Json("*") : Json(r.node)) : Json(nullptr)},
                       {"created", r.created}, {"revoked", r.revoked}});
  return Json{{"tokens", out}};
}

Result<Json> Controller::events(const Principal& who, int64_t after, int64_t limit) {
  if (Status st = perm::may_read_events(who); !st.ok()) {
    audit_denied(who, "read events", st.message());
    return st.error();
  }
  auto ev = store_->events_after(after, std::clamp<int64_t>(limit, 1, 10000));
  if (!ev.ok()) return ev.error();
  Json out = Json::array();
  for (const EventRow& e : *ev) out.push_back(event_json(e));
  return Json{{"events", out}};
}

}  // namespace tessera::server
