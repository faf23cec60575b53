#include "server/auth.h"

#include <fnmatch.h>

#include <openssl/evp.h>

#include <fstream>
#include <mutex>

namespace tessera::server {

const char* role_name(Role r) {
  switch (r) {
    case Role::kAdmin: return "admin";
    case Role::kTeamLead: return "team-lead";
    case Role::kMember: return "member";
    case Role::kViewer: return "viewer";
    case Role::kAgent: return "agent";
  }
  return "?";
}

Result<Role> parse_role(const std::string& name) {
  for (Role r : {Role::kAdmin, Role::kTeamLead, Role::kMember, Role::kViewer, Role::kAgent})
    if (name == role_name(r)) return r;
  return invalid_argument("role: unknown \"" + name + "\"; expected one of admin, team-lead, member, viewer, agent");
}

std::string sha256_hex(const std::string& data) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(data.data(), data.size(), digest, &len, EVP_sha256(), nullptr);
  static const char* hex = "0123456789abcdef";
  std::string out;
  out.reserve(len * 2);
  for (unsigned int i = 0; i < len; ++i) {
    out += hex[digest[i] >> 4];
    out += hex[digest[i] & 15];
  }
  return out;
}

std::string new_token() {
  unsigned char bytes[20];
  std::ifstream urandom("/dev/urandom", std::ios::binary);
  urandom.read(reinterpret_cast<char*>(bytes), sizeof bytes);
  if (!urandom) std::abort();  // no entropy source: refusing to mint guessable tokens
  static const char* hex = "0123456789abcdef";
  std::string t = "tsr_";
  for (unsigned char b : bytes) {
    t += hex[b >> 4];
    t += hex[b & 15];
  }
  return t;
}

void TokenRegistry::load(const std::vector<TokenRow>& rows) {
  std::unique_lock lock(mu_);
  by_hash_.clear();
  for (const TokenRow& r : rows) by_hash_[r.hash] = r;
}

void TokenRegistry::add(const TokenRow& row) {
  std::unique_lock lock(mu_);
  by_hash_[row.hash] = row;
}

std::optional<Principal> TokenRegistry::find(const std::string& token) const {
  const std::string h = sha256_hex(token);
  std::shared_lock lock(mu_);
  auto it = by_hash_.find(h);
  if (it == by_hash_.end() || it->second.revoked) return std::nullopt;
  auto role = parse_role(it->second.role);
  if (!role.ok()) return std::nullopt;
  return Principal{it->second.user, *role, it->second.queue, it->second.node};
}

std::vector<TokenRow> TokenRegistry::list() const {
  std::shared_lock lock(mu_);
  std::vector<TokenRow> out;
  for (const auto& [h, r] : by_hash_) out.push_back(r);
  return out;
}

size_t TokenRegistry::size() const {
  std::shared_lock lock(mu_);
  return by_hash_.size();
}

bool agent_may_speak_for(const std::string& pattern, const std::string& node) {
  return pattern.empty() || ::fnmatch(pattern.c_str(), node.c_str(), 0) == 0;
}

bool in_subtree(const QueueTree& tree, const std::string& queue, const std::string& root) {
  auto q = tree.find(queue);
  auto r = tree.find(root);
  if (!q.ok() || !r.ok()) return false;
  for (QueueId id = *q; id.valid(); id = tree.queue(id).parent)
    if (id == *r) return true;
  return false;
}

}  // namespace tessera::server
