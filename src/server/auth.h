// Authentication and roles. Tokens are random ("tsr_" + 40 hex digits), shown once, stored only as
// SHA-256 hashes. A Principal is who a token speaks for; the permission rules (docs/api.md) are pure
// functions of the principal and the queue tree. TokenRegistry is thread-safe (a shared mutex: HTTP
// threads look tokens up concurrently; creation is rare).
#pragma once

#include <map>
#include <optional>
#include <shared_mutex>
#include <string>
#include <vector>

#include "core/sched/queues.h"
#include "core/status.h"
#include "server/store.h"

namespace tessera::server {

enum class Role : uint8_t { kAdmin, kTeamLead, kMember, kViewer, kAgent };
const char* role_name(Role r);
Result<Role> parse_role(const std::string& name);  // error lists the roles

struct Principal {
  std::string user;
  Role role = Role::kViewer;
  std::string queue;  // team-lead / member: the root of the queue subtree they act in
  std::string node;   // agent: the node name or fnmatch pattern it may register and report for ("" = any)
};

// May an agent token bound to `pattern` speak for node `node`? ("" and "*" match every node.)
bool agent_may_speak_for(const std::string& pattern, const std::string& node);

std::string sha256_hex(const std::string& data);
std::string new_token();  // "tsr_" + 40 hex digits from the system's random source

class TokenRegistry {
 public:
  void load(const std::vector<TokenRow>& rows);
  void add(const TokenRow& row);
  // The principal of a bearer token, or nothing (unknown or revoked).
  std::optional<Principal> find(const std::string& token) const;
  std::vector<TokenRow> list() const;  // by hash
  size_t size() const;

 private:
  mutable std::shared_mutex mu_;
  std::map<std::string, TokenRow> by_hash_;
};

// Is `queue` the same as `root` or inside root's subtree?
bool in_subtree(const QueueTree& tree, const std::string& queue, const std::string& root);

}  // namespace tessera::server
