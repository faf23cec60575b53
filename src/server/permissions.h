// Who may do what (docs/server.md, "Tokens and roles"; docs/api.md): every permission rule of the
// API in one place, as pure functions of the principal and what it acts on. Each answers ok or a
// permission_denied error whose message says why; auditing the denial is the caller's (it knows the
// call). Thread-safe (no state).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "config/cluster_config.h"
#include "core/sched/queues.h"
#include "core/status.h"
#include "server/auth.h"

namespace tessera::server::perm {

// Agent tokens call only the agent protocol (/api/v1/agent/*); every other role any path.
Status may_call(const Principal& who, std::string_view path);
// Reading jobs, queues, nodes and reports: every role but agent.
Status may_read(const Principal& who);
// Tokens, node operations, backups, reload: admins. `what` completes "only admins may ...".
Status admin_only(const Principal& who, const std::string& what);
// The event log: admins and viewers.
Status may_read_events(const Principal& who);
// Submitting to leaf queue `queue`: admins anywhere; team leads and members inside their subtree.
Status may_submit(const Principal& who, const QueueTree& tree, const std::string& queue);
// Cancelling or re-prioritising job `id` of `owner` in `queue`: admins; team leads in their subtree;
// members their own jobs in their subtree.
Status may_modify(const Principal& who, const QueueTree& tree, const std::string& queue, const std::string& owner, int64_t id);
// A job's command, environment, working directory and logs: admins; team leads and members whose
// subtree holds the job (its team); viewers when `viewers_see_details`.
Status may_see_detail(const Principal& who, const QueueTree& tree, const std::string& queue, int64_t id, bool viewers_see_details);
// Using priority class `cls` for a job in leaf queue `queue` (submit, or a priority change; docs/server.md,
// "Priority classes"). An unknown class is invalid_argument. Admins may use every class. For the others:
// a queue whose `priority_classes` lists classes allows only those; a class with `roles:` only the roles
// listed; otherwise a class the queue names, or one no higher than the default class, is allowed.
Status may_use_class(const Principal& who, const config::ClusterConfig& config, const std::string& queue, const std::string& cls);
// Registering or reporting for `node`: admins, and agent tokens bound to it (name or pattern).
Status may_speak_for(const Principal& who, const std::string& node);

}  // namespace tessera::server::perm
