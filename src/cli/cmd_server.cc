// `tessera server`: the control plane (src/server). `--check-config` validates the config and exits;
// `--check-store full` checks every index of the store at start (the quick check always runs).
#include <cstdio>
#include <fstream>
#include <iostream>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "server/bench_api.h"
#include "server/server_main.h"

namespace tessera::cli {

void register_server(CLI::App& app) {
  auto* cmd = app.add_subcommand("server", "Run the controller: durable state, scheduling, REST API (docs/api.md)");
  auto opt = std::make_shared<server::ServerOptions>();
  auto check = std::make_shared<bool>(false);
  cmd->add_option("--data", opt->data_dir,
                  "Where the store lives: a directory (embedded SQLite, created if missing; the first admin token "
                  "goes to DIR/admin.token), sqlite:DIR, or a PostgreSQL connection string postgres://... "
                  "(password from PGPASSWORD or a password file, never in the string; docs/ha.md)");
  cmd->add_option("--admin-token-file", opt->admin_token_file,
                  "Where the first start writes the admin token (0600; must not exist). Required on a new "
                  "PostgreSQL store; default DIR/admin.token with a directory");
  cmd->add_option("--lease-ms", opt->lease_ms,
                  "PostgreSQL: the leader's lease; a standby takes over when it is not renewed this long")
      ->capture_default_str()->check(CLI::Range(int64_t(500), int64_t(600000)));
  cmd->add_option("--advertise-url", opt->advertise_url,
                  "PostgreSQL: the URL standbys send clients to when this controller leads (default http://--listen)");
  cmd->add_option("--advertise-agent-url", opt->advertise_agent_url,
                  "PostgreSQL: the URL standbys send agents to when this controller leads (default http://--agent-listen, "
                  "else the --advertise-url)");
  cmd->add_option("--listen", opt->listen, "HOST:PORT to serve on (port 0: any free port)")->capture_default_str();
  cmd->add_option("--config", opt->config_path, "Cluster config YAML (nodes, queues, priority classes; docs/server.md). Default: a built-in demo cluster");
  cmd->add_option("--threads", opt->http_threads, "HTTP handler threads")->capture_default_str()->check(CLI::Range(2, 1024));
  cmd->add_option("--agent-listen", opt->agent_listen,
                  "HOST:PORT of a listener for agents only (their heartbeats never queue behind users' requests); "
                  "point agents' --server at it");
  cmd->add_option("--max-connections", opt->max_connections, "Open HTTP connections at most, per listener")
      ->capture_default_str()->check(CLI::Range(16, 1000000));
  cmd->add_option("--max-connections-per-ip", opt->max_connections_per_ip, "Open HTTP connections at most per client address (0: no cap)")
      ->capture_default_str()->check(CLI::Range(0, 1000000));
  cmd->add_flag("--viewers-see-job-details", opt->viewers_see_job_details,
                "Viewers may read every job's command, environment (not secret values) and logs; by default only "
                "admins and the job's own team may");
  cmd->add_option("--idle-timeout", opt->idle_timeout_s, "Seconds after which a silent HTTP connection is closed")
      ->capture_default_str()->check(CLI::Range(1, 3600));
  cmd->add_option("--log-level", opt->log_level, "trace, debug, info, warn, error")->capture_default_str()
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error"}));
  cmd->add_flag("--agentless", opt->agentless,
                 "Nodes take work without agents and nothing runs the tasks (for trying policies and API tests)");
  cmd->add_option("--heartbeat-interval-ms", opt->heartbeat_interval_ms, "Heartbeat interval agents are told to use")
      ->capture_default_str()->check(CLI::Range(int64_t(50), int64_t(600000)));
  cmd->add_option("--agent-timeout-ms", opt->agent_timeout_ms,
                  "A node whose agent is silent this long is NotReady and its jobs are requeued")
      ->capture_default_str()->check(CLI::Range(int64_t(100), int64_t(3600000)));
  cmd->add_option("--task-lease-ms", opt->task_lease_ms,
                  "An agent with no heartbeat answered this long kills its tasks, and a job lost with its node "
                  "restarts no sooner than this after the node's last heartbeat (0 = max(60000, 4 x --agent-timeout-ms))")
      ->capture_default_str()->check(CLI::Range(int64_t(0), int64_t(86400000)));
  auto missed = std::make_shared<int>(0);
  cmd->add_option("--missed-heartbeats", *missed,
                  "NotReady after this many missed heartbeats (sets --agent-timeout-ms to N x the interval)")
      ->check(CLI::Range(1, 1000));
  cmd->add_flag("--check-config", *check, "Validate the config and exit (0 = valid)");
  auto store_check = std::make_shared<std::string>("quick");
  cmd->add_option("--check-store", *store_check,
                  "Check of an existing store at start: quick (every page's structure) or full (also every index; "
                  "slower). A store that fails is refused")
      ->capture_default_str()->check(CLI::IsMember({"quick", "full"}));
  cmd->callback([opt, check, missed, store_check] {
    if (*missed > 0) opt->agent_timeout_ms = opt->heartbeat_interval_ms * *missed;
    opt->store_check = *store_check == "full" ? server::StoreCheck::kFull : server::StoreCheck::kQuick;
    if (*check) {
      auto cfg = server::load_server_config(opt->config_path);
      if (!cfg.ok()) {
        std::cerr << "tessera server --check-config: " << (opt->config_path.empty() ? "(built-in)" : opt->config_path) << ": "
                  << cfg.error().message << "\n";
        throw CLI::RuntimeError(1);
      }
      std::cout << "config ok: " << server::describe_config(*cfg) << "\n";
      return;
    }
    const int rc = server::run_server(*opt);
    if (rc != 0) throw CLI::RuntimeError(rc);
  });
}

void register_bench_api(CLI::App& bench) {
  auto* cmd = bench.add_subcommand("api", "Durable submissions per second and job-listing latency through the real HTTP API");
  auto o = std::make_shared<server::BenchApiOptions>();
  auto json_path = std::make_shared<std::string>();
  cmd->add_option("--clients", o->clients, "Concurrent client connections")->capture_default_str()->check(CLI::Range(1, 1000));
  cmd->add_option("--seconds", o->seconds, "How long to submit")->capture_default_str()->check(CLI::Range(0.1, 3600.0));
  cmd->add_option("--list-jobs", o->list_jobs, "Jobs in the store while listing is timed")->capture_default_str();
  cmd->add_option("--list-requests", o->list_requests, "Page requests timed")->capture_default_str();
  cmd->add_option("--data", o->data_dir,
                  "Store: a directory, sqlite:DIR or postgres://... (default: a temporary directory, removed afterwards)");
  cmd->add_option("--json", *json_path, "Write results as JSON to PATH, or - for stdout");
  cmd->callback([o, json_path] {
    auto r = server::run_bench_api(*o, [](const std::string& s) { std::fprintf(stderr, "  bench api: %s\n", s.c_str()); });
    if (!r.ok()) {
      std::cerr << "tessera bench api: " << r.error().message << "\n";
      throw CLI::RuntimeError(1);
    }
    nlohmann::json j{{"clients", o->clients},
                     {"submitted", r->submitted},
                     {"submit_seconds", r->submit_seconds},
                     {"submissions_per_s", r->submissions_per_s},
                     {"submit_ms_p50", r->submit_ms_p50},
                     {"submit_ms_p99", r->submit_ms_p99},
                     {"store_batches", r->store_batches},
                     {"store_transactions", r->store_transactions},
                     {"jobs_listed_over", r->jobs_listed_over},
                     {"list_page_ms_p50", r->list_page_ms_p50},
                     {"list_page_ms_p99", r->list_page_ms_p99},
                     {"list_filtered_ms_p50", r->list_filtered_ms_p50},
                     {"list_filtered_ms_p99", r->list_filtered_ms_p99},
                     {"list_all_s", r->list_all_s}};
    std::printf("durable submissions: %lld in %.1f s = %.0f/s (p50 %.1f ms, p99 %.1f ms; %lld batches in %lld transactions)\n",
                (long long)r->submitted, r->submit_seconds, r->submissions_per_s, r->submit_ms_p50, r->submit_ms_p99,
                (long long)r->store_batches, (long long)r->store_transactions);
    std::printf("listing over %lld jobs: page of 100 p50 %.1f ms p99 %.1f ms; filtered page p50 %.1f ms p99 %.1f ms; all jobs in pages of 1000: %.2f s\n",
                (long long)r->jobs_listed_over, r->list_page_ms_p50, r->list_page_ms_p99, r->list_filtered_ms_p50,
                r->list_filtered_ms_p99, r->list_all_s);
    if (json_path->empty()) return;
    if (*json_path == "-") {
      std::cout << j.dump(2) << "\n";
    } else {
      std::ofstream(*json_path) << j.dump(2) << "\n";
    }
  });
}

}  // namespace tessera::cli
