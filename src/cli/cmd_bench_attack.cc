// tessera bench attack: heartbeat and /healthz latency while slow and idle connections are open
// (see server/bench_attack.h).
#include <cstdio>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "server/bench_attack.h"

namespace tessera::cli {

void register_bench_attack(CLI::App& bench) {
  auto* cmd = bench.add_subcommand("attack", "Heartbeat and /healthz latency while slow and idle clients hold connections open");
  auto o = std::make_shared<server::BenchAttackOptions>();
  auto json_path = std::make_shared<std::string>();
  auto shared = std::make_shared<bool>(false);
  cmd->add_option("--slow", o->slow, "Connections sending one header line every --slow-line-ms")->capture_default_str()->check(CLI::Range(0, 100000));
  cmd->add_option("--idle", o->idle, "Connections sending nothing")->capture_default_str()->check(CLI::Range(0, 100000));
  cmd->add_option("--slow-line-ms", o->slow_line_ms, "Milliseconds between a slow client's header lines")->capture_default_str()->check(CLI::Range(10, 60000));
  cmd->add_option("--seconds", o->seconds, "How long the attack lasts")->capture_default_str()->check(CLI::Range(1.0, 3600.0));
  cmd->add_option("--heartbeat-ms", o->heartbeat_ms, "Agents' heartbeat interval (NotReady after three missed)")->capture_default_str()->check(CLI::Range(100, 60000));
  cmd->add_option("--max-connections", o->max_connections, "The server's --max-connections")->capture_default_str()->check(CLI::Range(16, 1000000));
  cmd->add_flag("--shared-listener", *shared, "Agents use the users' port (no --agent-listen)");
  cmd->add_option("--json", *json_path, "Write results as JSON to PATH, or - for stdout");
  cmd->callback([o, json_path, shared] {
    o->agent_listener = !*shared;
    auto r = server::run_bench_attack(*o, [](const std::string& s) { std::fprintf(stderr, "  bench attack: %s\n", s.c_str()); });
    if (!r.ok()) {
      std::cerr << "tessera bench attack: " << r.error().message << "\n";
      throw CLI::RuntimeError(1);
    }
    nlohmann::json j{{"slow", o->slow}, {"idle", o->idle}, {"seconds", o->seconds}, {"agent_listener", o->agent_listener},
                     {"heartbeats", r->heartbeats}, {"heartbeats_failed", r->heartbeats_failed},
                     {"heartbeat_ms_p50", r->heartbeat_ms_p50}, {"heartbeat_ms_p99", r->heartbeat_ms_p99},
                     {"heartbeat_ms_max", r->heartbeat_ms_max}, {"probes", r->probes}, {"probes_failed", r->probes_failed},
                     {"healthz_ms_p50", r->healthz_ms_p50}, {"healthz_ms_p99", r->healthz_ms_p99},
                     {"healthz_ms_max", r->healthz_ms_max}, {"attack_connections_open", r->attack_connections_open},
                     {"not_ready", r->not_ready}};
    std::printf("heartbeats: %lld answered, %lld failed; p50 %.1f ms, p99 %.1f ms, max %.1f ms\n", (long long)r->heartbeats,
                (long long)r->heartbeats_failed, r->heartbeat_ms_p50, r->heartbeat_ms_p99, r->heartbeat_ms_max);
    std::printf("/healthz (new connection each): %lld answered, %lld failed; p50 %.1f ms, p99 %.1f ms, max %.1f ms\n",
                (long long)r->probes, (long long)r->probes_failed, r->healthz_ms_p50, r->healthz_ms_p99, r->healthz_ms_max);
    std::printf("attack connections still open at the end: %lld; nodes gone NotReady: %lld\n", (long long)r->attack_connections_open,
                (long long)r->not_ready);
    if (json_path->empty()) return;
    if (*json_path == "-")
      std::cout << j.dump(2) << "\n";
    else
      std::ofstream(*json_path) << j.dump(2) << "\n";
  });
}

}  // namespace tessera::cli
