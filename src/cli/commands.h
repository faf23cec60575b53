// Subcommand registration for the `tessera` and `tessera-full` binaries (src/cli/main.cc). Each
// register_* adds one subcommand (and its callback) to the app; each lives in its own cmd_*.cc file.
// The client verbs (submit ... report) are in both binaries; sim, bench, server, admin, agent, up and
// plan only in tessera-full, which `tessera` runs for them.
#pragma once

#include <CLI/CLI.hpp>

namespace tessera::cli {

void register_sim(CLI::App& app);     // tessera sim alloc ...
void register_bench(CLI::App& app);   // tessera bench place ...
void register_scenario(CLI::App& sim);  // tessera sim scenario FILE... (under the sim subcommand)
void register_sim_run(CLI::App& sim);   // tessera sim run --cluster FILE --workload SPEC ...
void register_server(CLI::App& app);      // tessera server --data DIR --listen HOST:PORT [--config FILE]
void register_bench_api(CLI::App& bench);  // tessera bench api (under the bench subcommand)
void register_bench_attack(CLI::App& bench);  // tessera bench attack (under the bench subcommand)
void register_bench_cluster(CLI::App& bench);  // tessera bench cluster (cmd_bench_cluster.cc)
// The REST API client verbs.
void register_infra(CLI::App& app);       // tessera queues, nodes, cordon, drain, resume, interrupt (cmd_client.cc)
void register_tokens(CLI::App& app);      // tessera token, whoami (cmd_client.cc)
void register_admin(CLI::App& app);       // tessera admin backup|restore|reload (cmd_admin.cc; tessera-full only)
void register_submit(CLI::App& app);      // tessera submit (cmd_submit.cc)
void register_job_verbs(CLI::App& app);   // tessera jobs, priority (cmd_jobs.cc); it calls register_show_logs
void register_show_logs(CLI::App& app);   // tessera show, jobs show, logs (cmd_show.cc)
void register_workflow(CLI::App& app);    // tessera cancel, hold, release, requeue (cmd_workflow.cc)
void register_run(CLI::App& app);         // tessera run (cmd_run.cc)
void register_history(CLI::App& app);     // tessera history (cmd_history.cc)
void register_agent(CLI::App& app);  // tessera agent --server URL --token T --node NAME [--gpus fake:...] (cmd_agent.cc)
void register_plan(CLI::App& app);  // tessera plan buy-vs-rent (cmd_plan.cc)
void register_up(CLI::App& app);    // tessera up: controller + local agent on one machine (cmd_agent.cc)
void register_report(CLI::App& app);  // tessera report chargeback|usage (cmd_report.cc)

}  // namespace tessera::cli
