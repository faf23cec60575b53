#include "server/permissions.h"

#include <algorithm>

namespace tessera::server::perm {

namespace {
const char* kAgentOnly = "agent tokens may only call /api/v1/agent/*";
}  // namespace

Status may_call(const Principal& who, std::string_view path) {
  if (who.role == Role::kAgent && path.substr(0, 14) != "/api/v1/agent/") return permission_denied(kAgentOnly);
  return {};
}

Status may_read(const Principal& who) {
  if (who.role == Role::kAgent) return permission_denied(kAgentOnly);
  return {};
}

Status admin_only(const Principal& who, const std::string& what) {
  if (who.role == Role::kAdmin) return {};
  return permission_denied("only admins may " + what);
}

Status may_read_events(const Principal& who) {
  if (who.role == Role::kAdmin || who.role == Role::kViewer) return {};
  return permission_denied("only admins and viewers may read the event log");
}

Status may_submit(const Principal& who, const QueueTree& tree, const std::string& queue) {
  switch (who.role) {
    case Role::kAdmin: return {};
    case Role::kTeamLead:
    case Role::kMember:
      if (in_subtree(tree, queue, who.queue)) return {};
      return permission_denied(std::string(role_name(who.role)) + " " + who.user + " may submit only to queue " + who.queue +
                               " and its children, not " + queue);
    case Role::kViewer:
    case Role::kAgent: break;
  }
  return permission_denied(std::string(role_name(who.role)) + " tokens may not submit jobs");
}

Status may_modify(const Principal& who, const QueueTree& tree, const std::string& queue, const std::string& owner, int64_t id) {
  switch (who.role) {
    case Role::kAdmin: return {};
    case Role::kTeamLead:
      if (in_subtree(tree, queue, who.queue)) return {};
      return permission_denied("team-lead of " + who.queue + " may not act on job " + std::to_string(id) + " in queue " + queue +
                               " (outside their queue subtree)");
    case Role::kMember:
      if (owner == who.user && in_subtree(tree, queue, who.queue)) return {};
      return permission_denied("members may act only on their own jobs; job " + std::to_string(id) + " belongs to " + owner);
    case Role::kViewer: return permission_denied("viewers may only read");
    case Role::kAgent: break;
  }
  return permission_denied(kAgentOnly);
}

Status may_see_detail(const Principal& who, const QueueTree& tree, const std::string& queue, int64_t id, bool viewers_see_details) {
  switch (who.role) {
    case Role::kAdmin: return {};
    case Role::kTeamLead:
    case Role::kMember:
      if (in_subtree(tree, queue, who.queue)) return {};
      return permission_denied("job " + std::to_string(id) + " is in queue " + queue + ", outside " + who.queue +
                               "'s subtree: its command, environment and logs are its team's");
    case Role::kViewer:
      if (viewers_see_details) return {};
      return permission_denied("viewers see jobs' state and resources, not their command, environment or logs");
    case Role::kAgent: break;
  }
  return permission_denied(kAgentOnly);
}

Status may_speak_for(const Principal& who, const std::string& node) {
  if (who.role == Role::kAdmin) return {};
  if (who.role != Role::kAgent) return permission_denied("only agent tokens may register and report for nodes");
  if (agent_may_speak_for(who.node, node)) return {};
  return permission_denied("agent token of " + who.user + " is bound to node " + who.node + ", not " + node);
}

Status may_use_class(const Principal& who, const config::ClusterConfig& config, const std::string& queue,
                     const std::string& cls) {
  const PriorityClass* pc = nullptr;
  std::string names;
  for (const PriorityClass& c : config.scheduler.priority_classes) {
    if (c.name == cls) pc = &c;
    names += (names.empty() ? "" : ", ") + c.name;
  }
  if (!pc) return invalid_argument("priority_class: unknown \"" + cls + "\"; expected one of " + names);
  if (who.role == Role::kAdmin) return {};
  auto join = [](const std::vector<std::string>& v) {
    std::string out;
    for (const std::string& x : v) out += (out.empty() ? "" : ", ") + x;
    return out;
  };
  const auto q = config.queue_classes.find(queue);
  const bool queue_lists = q != config.queue_classes.end() && !q->second.empty();
  if (queue_lists && std::find(q->second.begin(), q->second.end(), cls) == q->second.end())
    return permission_denied("priority_class: queue " + queue + " allows only " + join(q->second) +
                             " (its priority_classes in the cluster config)");
  const std::string role = role_name(who.role);
  if (const auto r = config.class_roles.find(cls); r != config.class_roles.end()) {
    if (std::find(r->second.begin(), r->second.end(), role) != r->second.end()) return {};
    return permission_denied("priority_class: " + cls + " may be used by admins" +
                             (r->second.empty() ? std::string(" only") : " and " + join(r->second)) + ", not by a " + role +
                             " (priority_classes[" + cls + "].roles in the cluster config)");
  }
  if (queue_lists) return {};  // the queue names it
  const PriorityClass* def = config::default_priority_class(config);
  if (!def || pc->value <= def->value) return {};
  return permission_denied("priority_class: " + cls + " (value " + std::to_string(pc->value) + ") is above the default class " +
                           def->name + " (value " + std::to_string(def->value) + "): a " + role +
                           " may use it only in a queue whose priority_classes names it, or if its roles: list " + role +
                           " (cluster config; ask an admin)");
}

}  // namespace tessera::server::perm
