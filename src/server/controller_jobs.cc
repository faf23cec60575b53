// Controller: the job API (submit, list, show, cancel, priority), queues, and where logs are.
#include "server/controller_state.h"

namespace tessera::server {

Result<Json> Controller::submit(const Principal& who, config::JobSpec spec, const std::string& idem, bool* created) {
  auto created_flag = std::make_shared<bool>(false);
  auto result = [&]() -> Result<Json> {
    return answer<Json>([=, this](State& s, const Reply& reply) {
      if (!idem.empty()) {
        auto it = s.by_idempotency_key.find({who.user, idem});
        if (it != s.by_idempotency_key.end()) {
          // Earlier batches commit first: answering after this empty write means the original is durable.
          Json again = record_to_api(s.jobs.at(it->second), s.cluster, nullptr);
          if (auto arr = s.arrays.find(it->second); arr != s.arrays.end())
            again["array_job_id"] = it->second, again["array_size"] = arr->second.size();
          s.reply_when_durable(WriteBatch{}, reply, std::move(again));
          return;
        }
      }
      // The queue: a leaf, by name or path.
      std::string qname = spec.queue;
      if (const auto slash = qname.rfind('/'); slash != std::string::npos) qname = qname.substr(slash + 1);
      auto q = s.tree->find(qname);
      if (!q.ok()) {
        std::string names;
        for (const Queue& qq : s.tree->queues())
          if (qq.leaf()) names += (names.empty() ? "" : ", ") + qq.name;
        reply->set_value(invalid_argument("queue: unknown \"" + spec.queue + "\"; leaf queues are " + names));
        return;
      }
      if (!s.tree->queue(*q).leaf()) {
        reply->set_value(invalid_argument("queue: \"" + qname + "\" has child queues; submit to a leaf queue"));
        return;
      }
      if (Status st = perm::may_submit(who, *s.tree, qname); !st.ok()) {
        s.deny(who, "submit", st.message());
        reply->set_value(st.error());
        return;
      }
      if (Status cs = s.may_use_class(who, qname, spec.priority_class); !cs.ok()) {
        if (cs.error().code == ErrorCode::kPermissionDenied) s.deny(who, "submit", cs.message());
        reply->set_value(cs.error());
        return;
      }
      // Its container and mounts: what its queue may mount, and the pools that hold its data.
      std::vector<std::string> queue_path;
      for (QueueId a : s.tree->path_to_root(*q)) queue_path.push_back(s.tree->queue(a).name);
      if (Status ds = check_job_data(spec, s.config.storage, queue_path); !ds.ok()) {
        if (ds.error().code == ErrorCode::kPermissionDenied) s.deny(who, "submit", ds.message());
        reply->set_value(ds.error());
        return;
      }
      auto pools = data_pools(spec, s.config.storage, s.cluster.pools());
      if (!pools.ok()) {
        reply->set_value(pools.error());
        return;
      }
      Gang gang = spec.gang();
      gang.task.pools = *pools;
      // Can it ever fit (on the configured cluster, empty)?
      const nlohmann::json spec_json = config::job_spec_to_json(spec);
      std::string shape = spec_json["resources"].dump() + "/" + spec_json["tasks"].dump() + "/" +
                          std::to_string(spec.min_tasks) + "/" + std::to_string(int(spec.topology.mode)) + spec.topology.level;
      for (PoolId p : gang.task.pools) shape += "/d" + std::to_string(p.value);
      auto cached = s.never_fits_cache.find(shape);
      if (cached == s.never_fits_cache.end()) {
        // Bounded: every distinct shape a client sends would otherwise stay here for good.
        if (s.never_fits_cache.size() >= State::kMaxNeverFitsCache) s.never_fits_cache.clear();
        PlacementEngine engine(*s.fit_policy, EngineOptions{});
        const PlacementResult pr = engine.place(s.empty_cluster, gang);
        std::string why = pr.outcome == Outcome::kPlaced ? "" : pr.reason;
        // More whole GPUs per task than any node has: name the largest node and the split that fits.
        if (!why.empty() && !gang.varied() && gang.task.whole_gpus() && gang.task.mig_profile.empty()) {
          const Node* largest = nullptr;
          for (const Node& n : s.empty_cluster.nodes())
            if (!largest || n.gpus.size() > largest->gpus.size()) largest = &n;
          const int most = largest ? int(largest->gpus.size()) : 0;
          if (largest && most > 0 && gang.task.gpu_count > most) {
            const int64_t total = int64_t(gang.tasks) * gang.task.gpu_count;
            why = "asks " + std::to_string(gang.task.gpu_count) + " GPUs per task; the largest node has " + std::to_string(most) +
                  " " + (largest->gpu_model() ? largest->gpu_model()->name : std::string("GPUs")) +
                  (total % most == 0 ? " — use tasks: " + std::to_string(total / most) + ", gpus: " + std::to_string(most) : std::string());
          }
        }
        cached = s.never_fits_cache.emplace(shape, why).first;
      }
      if (!cached->second.empty()) {
        reply->set_value(invalid_argument("resources: this request can never fit the cluster: " + cached->second));
        return;
      }
      // Dependencies name jobs that exist (an array job id: all its elements).
      for (const config::Dependency& d : spec.workflow.dependencies)
        for (const config::JobRef& ref : d.jobs)
          if (s.resolve(ref).empty()) {
            reply->set_value(invalid_argument("dependency: job " + config::job_ref_text(ref) + " does not exist"));
            return;
          }
      // One record, or one per array element (consecutive ids; the first is the array job id).
      std::vector<int32_t> indices{-1};
      if (spec.workflow.array) indices = spec.workflow.array->indices;
      const int64_t first = s.next_id;
      WriteBatch b;
      std::vector<int64_t> ids;
      Json answer;
      for (int32_t index : indices) {
        JobRecord r;
        r.id = s.next_id++;
        r.spec = spec;
        r.queue_name = qname;
        r.idempotency_key = idem;
        if (index >= 0) r.array_job = first, r.array_index = index;
        r.held = spec.workflow.hold;
        if (r.held) r.held_by = who.user;
        r.job.id = JobId(uint32_t(r.id));
        r.job.name = r.spec.name;
        r.job.user = who.user;
        r.job.queue = *q;
        r.job.priority_class = r.spec.priority_class;
        r.job.gang = gang;
        r.job.gang.id = r.job.id;
        r.job.gang.queue = *q;
        r.submitted_ms = s.now_ms();  // one reading: submitted, submitted_ms and the event's time
        r.job.submitted = r.submitted_ms / 1000;
        r.job.expected_runtime = r.spec.expected_runtime;
        r.job.max_runtime = r.spec.max_runtime;
        r.job.checkpoint.interval = r.spec.checkpoint.interval;
        r.job.checkpoint.grace = r.spec.checkpoint.grace;
        Json detail{{"queue", qname}, {"priority_class", r.job.priority_class}};
        if (index >= 0) detail["array_job_id"] = first, detail["array_task_id"] = index;
        b.events.push_back(s.event(r.id, EventKind::kSubmitted, who.user, std::move(detail), r.submitted_ms));
        b.jobs.push_back(s.row(r));
        if (answer.is_null()) answer = record_to_api(r, s.cluster, nullptr);
        s.active_ids.insert(r.id);
        ids.push_back(r.id);
        s.jobs.insert(std::move(r));
      }
      if (spec.workflow.array) {
        s.arrays[first] = ids;
        answer["array_job_id"] = first;
        answer["array_size"] = ids.size();
      }
      if (!idem.empty()) s.by_idempotency_key[{who.user, idem}] = first;
      s.dirty = true;
      *created_flag = true;
      // If the write fails, the jobs must not stay in memory either.
      Controller::State* sp = &s;
      const std::string user = who.user;
      const size_t n = ids.size();
      s.persist(std::move(b), [reply, answer, sp, ids, idem, qname, user, n](Status st) {
        if (st.ok()) {
          sp->m.submitted->inc({qname}, double(n));  // thread-safe; this runs on the store's writer thread
          reply->set_value(answer);
          return;
        }
        reply->set_value(store_failure(st, "the job was not saved"));
        sp->loop.post([ids, idem, user](State& s2) {
          for (int64_t id : ids) {
            s2.jobs.erase(id);
            s2.active_ids.erase(id);
          }
          s2.arrays.erase(ids.front());
          if (!idem.empty()) s2.by_idempotency_key.erase({user, idem});
        });
      });
    });
  }();
  if (created) *created = *created_flag;
  return result;
}

Result<Json> Controller::list_jobs(const Principal& who, const JobFilter& f) {
  return call<Json>([who, f](State& s) -> Result<Json> {
    if (Status st = s.may_read(who); !st.ok()) return st.error();
    std::array<bool, kJobStates> want_state{};
    want_state.fill(f.states.empty());
    for (const std::string& st : f.states) {
      bool ok = false;
      for (JobState js : {JobState::kPending, JobState::kRunning, JobState::kCheckpointing, JobState::kSucceeded,
                          JobState::kFailed, JobState::kCancelled, JobState::kTimeout})
        if (st == job_state_name(js)) ok = want_state[size_t(js)] = true;
      if (!ok)
        return invalid_argument("state: unknown \"" + st + "\"; expected pending, running, checkpointing, succeeded, failed, cancelled, timeout");
    }
    std::vector<char> in_queue;  // by queue id: inside the filter's subtree
    if (!f.queue.empty()) {
      auto root = s.tree->find(f.queue);
      if (!root.ok()) return invalid_argument("queue: unknown \"" + f.queue + "\"");
      in_queue.assign(s.tree->size(), 0);
      for (const Queue& q : s.tree->queues())
        for (QueueId a : s.tree->path_to_root(q.id)) in_queue[q.id.value] |= a == *root;
    }
    auto match = [&](const JobRecord& r) {
      if (!f.user.empty() && r.job.user != f.user) return false;
      if (!f.name.empty() && r.spec.name != f.name) return false;
      if (f.active_only && !active(r.job.state)) return false;
      if (f.array > 0 && r.array_job != f.array) return false;
      if ((f.finished_after >= 0 || f.finished_before >= 0) &&
          (active(r.job.state) || (f.finished_after >= 0 && r.finished < f.finished_after) ||
           (f.finished_before >= 0 && r.finished >= f.finished_before)))
        return false;
      if (!want_state[size_t(r.job.state)]) return false;
      if (!in_queue.empty() && !in_queue[r.job.queue.value]) return false;
      return true;
    };
    Json out = Json::array();
    int64_t total = 0, last = 0, remaining = 0;  // remaining: matches after this page
    auto visit = [&](const JobRecord& r) {
      if (!match(r)) return;
      ++total;
      if (r.id <= f.after) return;
      if (int64_t(out.size()) < f.limit) {
        out.push_back(record_to_api(r, s.cluster, r.pending ? &*r.pending : nullptr, false));
        s.explain_agentless(r, out.back());
        last = r.id;
      } else {
        ++remaining;
      }
    };
    if (f.array > 0) {
      if (auto arr = s.arrays.find(f.array); arr != s.arrays.end())
        for (int64_t id : arr->second) visit(s.jobs.at(id));
    } else if (f.active_only) {
      for (int64_t id : s.active_ids) visit(s.jobs.at(id));
    } else {
      s.jobs.walk(0, [&](const JobRecord& r) {
        visit(r);
        return true;
      });
    }
    return Json{{"jobs", std::move(out)}, {"next_after", remaining > 0 ? Json(last) : Json(nullptr)}, {"total", total},
                {"remaining", remaining}};
  });
}

Result<Json> Controller::show_job(const Principal& who, int64_t id) {
  auto j = call<Json>([who, id](State& s) -> Result<Json> {
    if (Status st = s.may_read(who); !st.ok()) return st.error();
    const JobRecord* r = s.jobs.find(id);
    if (!r) return not_found("job " + std::to_string(id) + ": no such job");
    Json j = record_to_api(*r, s.cluster, r->pending ? &*r->pending : nullptr, true);
    s.explain_agentless(*r, j);
    if (Status st = s.may_see_detail(who, *r); !st.ok()) {
      for (const char* k : {"command", "env", "secret_env", "working_dir"}) j["spec"].erase(k);
      j["spec"]["checkpoint"].erase("dir");
      j["detail_hidden"] = st.message();
    }
    const int max_int = s.config.scheduler.pool_rules.spot_max_interruptions;
    if (max_int > 0 && r->job.spot_interruptions >= max_int) {
      const std::string avoid = State::spot_avoid_text(r->job.spot_interruptions);
      j["spot_avoid"] = avoid;
      if (r->job.state == JobState::kPending && j["pending"].is_object())
        j["pending"]["reason"] = j["pending"]["reason"].get<std::string>() + "; " + avoid;
    }
    return j;
  });
  if (!j.ok()) return j;
  auto ev = store_->events_for_job(id);
  if (!ev.ok()) return ev.error();
  Json events = Json::array();
  for (const EventRow& e : *ev) events.push_back(event_json(e));
  (*j)["events"] = std::move(events);
  (*j)["attempts"] = attempts_json(*ev);
  return j;
}

Result<Json> Controller::set_priority(const Principal& who, int64_t id, const std::string& cls) {
  return answer<Json>([=, this](State& s, const Reply& reply) {
    JobRecord* rp = s.find_or_reply(id, reply);
    if (!rp) return;
    JobRecord& r = *rp;
    Status st = s.may_modify(who, r);
    if (st.ok()) st = s.may_use_class(who, r.queue_name, cls);
    if (!st.ok()) {
      if (st.error().code == ErrorCode::kPermissionDenied) s.deny(who, "priority job " + std::to_string(id), st.message());
      reply->set_value(st.error());
      return;
    }
    if (!active(r.job.state)) {
      reply->set_value(failed_precondition("job " + std::to_string(id) + " has already ended; its priority cannot change"));
      return;
    }
    const std::string old = r.job.priority_class;
    r.job.priority_class = cls;
    r.spec.priority_class = cls;
    WriteBatch b;
    b.events.push_back(s.event(r.id, EventKind::kPriorityChanged, who.user, Json{{"from", old}, {"to", cls}}));
    b.jobs.push_back(s.row(r));
    s.dirty = true;
    s.reply_when_durable(std::move(b), reply, record_to_api(r, s.cluster, nullptr));
  });
}

// ---- queues and nodes ----------------------------------------------------------------------------

Result<Json> Controller::queues(const Principal& who) {
  return call<Json>([who](State& s) -> Result<Json> {
    if (Status st = s.may_read(who); !st.ok()) return st.error();
    const QueueTree& tree = *s.tree;
    std::vector<QueueLoad> load(tree.size());
    std::vector<int64_t> pending(tree.size()), running(tree.size());
    for (int64_t id : s.active_ids) {
      const JobRecord& r = s.jobs.at(id);
      QueueLoad& l = load[r.job.queue.value];
      if (placed(r.job.state)) {
        for (const auto& [cls, m] : s.held_by(r)) l.allocated[cls] += m, l.demand[cls] += m;
        ++running[r.job.queue.value];
      } else {
        ++pending[r.job.queue.value];
      }
    }
    ClassAmounts capacity;
    for (const Node& n : s.cluster.nodes())
      for (const Gpu& g : n.gpus)
        if (g.health != GpuHealth::kUnhealthy) capacity[s.config.scheduler.model_class(g.model->name)] += 1000;
    const FairShare fs = FairShare::compute(tree, capacity, load);
    Json out = Json::array();
    std::vector<int64_t> sub_pending(tree.size()), sub_running(tree.size());
    for (const Queue& q : tree.queues())
      for (QueueId a : tree.path_to_root(q.id)) sub_pending[a.value] += pending[q.id.value], sub_running[a.value] += running[q.id.value];
    for (const Queue& q : tree.queues()) {
      ClassAmounts used, borrowed, fair;
      for (const auto& [cls, cap] : capacity) {
        (void)cap;
        used[cls] = fs.allocated(q.id, cls);
        fair[cls] = fs.fair_share(q.id, cls);
        const auto g = q.guaranteed.find(cls);
        borrowed[cls] = std::max<int64_t>(0, used[cls] - (g == q.guaranteed.end() ? 0 : g->second));
      }
      std::string path;
      for (QueueId a : tree.path_to_root(q.id)) path = tree.queue(a).name + (path.empty() ? "" : "/" + path);
      auto cls = s.config.queue_classes.find(q.name);
      Json usable = Json::array();  // the classes the caller may use in this queue (the class policy)
      for (const PriorityClass& pc : s.config.scheduler.priority_classes)
        if (s.may_use_class(who, q.name, pc.name).ok()) usable.push_back(pc.name);
      out.push_back(Json{{"name", q.name}, {"parent", q.parent.valid() ? tree.queue(q.parent).name : ""}, {"path", path},
                         {"leaf", q.leaf()}, {"weight", q.weight}, {"guaranteed", amounts_json(q.guaranteed)},
                         {"limit", amounts_json(q.limit)}, {"used", amounts_json(used)}, {"borrowed", amounts_json(borrowed)},
                         {"fair_share", amounts_json(fair)}, {"pending", sub_pending[q.id.value]},
                         {"running", sub_running[q.id.value]},
                         {"usage", q.id.value < s.usage.size() ? s.usage[q.id.value] : 0.0},
                         {"priority_classes", cls == s.config.queue_classes.end() ? Json::array() : Json(cls->second)},
                         {"usable_classes", std::move(usable)}});
    }
    return Json{{"queues", std::move(out)}};
  });
}

Result<Json> Controller::log_source(const Principal& who, int64_t id, int task, int64_t attempt) {
  // An earlier attempt ran where its started event says.
  std::string node_of_attempt;
  if (attempt > 0) {
    auto ev = store_->events_for_job(id);
    if (!ev.ok()) return ev.error();
    for (const EventRow& e : *ev) {
      if (e.kind != event_kind_name(EventKind::kStarted)) continue;
      const Json d = Json::parse(e.detail, nullptr, false);
      if (!d.is_object() || d.value("attempt", int64_t(0)) != attempt) continue;
      const Json p = d.value("placement", Json::array());
      if (task >= 0 && size_t(task) < p.size() && p[size_t(task)].is_object()) node_of_attempt = p[size_t(task)].value("node", "");
    }
  }
  return call<Json>([who, id, task, attempt, node_of_attempt](State& s) -> Result<Json> {
    if (Status st = s.may_read(who); !st.ok()) return st.error();
    const JobRecord* r = s.jobs.find(id);
    if (!r) return not_found("job " + std::to_string(id) + ": no such job");
    if (Status st = s.may_see_detail(who, *r); !st.ok()) return st.error();
    if (r->last_nodes.empty()) return not_found("job " + std::to_string(id) + ": has not started yet, so it has no logs");
    if (attempt > r->attempt)
      return not_found("attempt: job " + std::to_string(id) + " has had " + std::to_string(r->attempt) + " attempts");
    if (attempt > 0 && attempt != r->attempt && node_of_attempt.empty())
      return not_found("attempt: job " + std::to_string(id) + " has no task " + std::to_string(task) + " in attempt " +
                       std::to_string(attempt));
    if (task < 0 || (node_of_attempt.empty() && size_t(task) >= r->last_nodes.size()))
      return invalid_argument("task: job " + std::to_string(id) + " has tasks 0.." + std::to_string(r->last_nodes.size() - 1));
    const std::string& node = node_of_attempt.empty() ? r->last_nodes[size_t(task)] : node_of_attempt;
    auto nid = s.cluster.find_node(node);
    if (!nid.ok()) return not_found("node " + node + " is no longer in the configuration");
    const NodeAdmin& na = s.node_admin[nid->value];
    if (!na.registered || na.log_port == 0)
      return Error{ErrorCode::kUnavailable, "node " + node + ": its agent has not registered with this controller, so its logs cannot be reached; retry when `tessera nodes` shows it ready"};
    return Json{{"node", node}, {"address", na.address}, {"log_port", na.log_port}, {"log_secret", na.log_secret},
                {"attempt", attempt > 0 ? attempt : r->attempt}};
  });
}

// ---- tokens, events, config -------------------------------------------------------------------

}  // namespace tessera::server
