// Job spec parsing (config/job_spec.h): a full spec in JSON and YAML, defaults, the canonical round
// trip, and a corpus of bad specs, each expected to name its field.
#include "config/job_spec.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace tessera::config {
namespace {

const char* kFullJson = R"({
  "name": "bert-large", "queue": "team-a/nlp", "project": "nlp", "priority_class": "production-training",
  "kind": "training", "tasks": 4, "min_tasks": 2,
  "resources": {"gpus": 8, "gpu_models": ["h100-80gb-sxm"], "cpu": 16, "memory": "64Gi"},
  "topology": {"mode": "required", "level": "leaf"},
  "checkpoint": {"interval": "30m", "signal": "SIGUSR2", "grace": 300, "dir": "/ckpt"},
  "expected_runtime": "2h", "max_runtime": "1d", "spot_tolerant": true,
  "command": ["python", "train.py", "--lr", "0.1"], "env": {"NCCL_DEBUG": "INFO", "_X1": ""},
  "working_dir": "/work"})";

const char* kFullYaml = R"(
name: bert-large
queue: team-a/nlp
project: nlp
priority_class: production-training
kind: training
tasks: 4
min_tasks: 2
resources:
  gpus: 8
  gpu_models: [h100-80gb-sxm]
  cpu: 16
  memory: 64Gi
topology: {mode: required, level: leaf}
checkpoint: {interval: 30m, signal: SIGUSR2, grace: 300, dir: /ckpt}
expected_runtime: 2h
max_runtime: 1d
spot_tolerant: true
command: [python, train.py, --lr, "0.1"]
env: {NCCL_DEBUG: INFO, _X1: ""}
working_dir: /work
)";

TEST(JobSpec, FullSpecJsonAndYamlAgree) {
  auto j = parse_job_spec_json(kFullJson);
  ASSERT_TRUE(j.ok()) << j.error().message;
  auto y = parse_job_spec_yaml(kFullYaml);
  ASSERT_TRUE(y.ok()) << y.error().message;
  EXPECT_TRUE(*j == *y);
  const JobSpec& s = *j;
  EXPECT_EQ(s.name, "bert-large");
  EXPECT_EQ(s.queue, "team-a/nlp");
  EXPECT_EQ(s.priority_class, "production-training");
  EXPECT_EQ(s.kind, JobKind::kTraining);
  EXPECT_EQ(s.tasks, 4);
  EXPECT_EQ(s.min_tasks, 2);
  EXPECT_EQ(s.task.gpu_count, 8);
  ASSERT_EQ(s.task.gpu_models.size(), 1u);
  EXPECT_EQ(s.task.gpu_models[0], "H100-80GB-SXM") << "canonical model name";
  EXPECT_EQ(s.task.cpu.v, 16000);
  EXPECT_EQ(s.task.memory.v, 64 * 1024);
  EXPECT_EQ(s.topology.mode, TopologyMode::kRequired);
  EXPECT_EQ(s.topology.level, "leaf");
  EXPECT_EQ(s.checkpoint.interval, 1800);
  EXPECT_EQ(s.checkpoint.signal, "SIGUSR2");
  EXPECT_EQ(s.checkpoint.dir, "/ckpt");
  EXPECT_EQ(s.expected_runtime, 7200);
  EXPECT_EQ(s.max_runtime, 86400);
  EXPECT_TRUE(s.spot_tolerant);
  EXPECT_EQ(s.command, (std::vector<std::string>{"python", "train.py", "--lr", "0.1"}));
  EXPECT_EQ(s.env.at("NCCL_DEBUG"), "INFO");
  EXPECT_EQ(s.working_dir, "/work");
  const Gang g = s.gang();
  EXPECT_EQ(g.name, "bert-large");
  EXPECT_EQ(g.tasks, 4);
  EXPECT_EQ(g.required_tasks(), 2);
  EXPECT_TRUE(g.checkpointable);
  EXPECT_EQ(g.task, s.task);
}

TEST(JobSpec, Defaults) {
  auto s = parse_job_spec_yaml("name: j\nqueue: q\ncommand: [sleep, '10']\n");
  ASSERT_TRUE(s.ok()) << s.error().message;
  EXPECT_EQ(s->priority_class, "research");
  EXPECT_EQ(s->kind, JobKind::kTraining);
  EXPECT_EQ(s->tasks, 1);
  EXPECT_EQ(s->min_tasks, 0);
  EXPECT_TRUE(s->task.cpu_only());
  EXPECT_EQ(s->topology.mode, TopologyMode::kNone);
  EXPECT_EQ(s->checkpoint.interval, 0);
  EXPECT_EQ(s->checkpoint.signal, "SIGUSR1");
  EXPECT_EQ(s->checkpoint.grace, 300);
  EXPECT_FALSE(s->gang().checkpointable);
  EXPECT_EQ(s->command[1], "10");
}

TEST(JobSpec, SharesAndMig) {
  auto share = parse_job_spec_json(
      R"({"name": "s", "queue": "q", "command": ["x"], "resources": {"gpu_milli": 500, "gpu_memory": "10Gi", "cpu": "500m"}})");
  ASSERT_TRUE(share.ok()) << share.error().message;
  EXPECT_EQ(share->task.gpu_count, 1) << "gpu_milli without gpus is a share of one GPU";
  EXPECT_EQ(share->task.milli_per_gpu.v, 500);
  EXPECT_EQ(share->task.gpu_memory.v, 10240);
  EXPECT_EQ(share->task.cpu.v, 500);
  EXPECT_TRUE(share->task.gpu_share());
  auto mig = parse_job_spec_yaml("name: m\nqueue: q\ncommand: [x]\nkind: inference\nresources: {mig: 3g.40gb}\n");
  ASSERT_TRUE(mig.ok()) << mig.error().message;
  EXPECT_TRUE(mig->task.mig());
  EXPECT_EQ(mig->task.gpu_count, 0);
  EXPECT_EQ(mig->kind, JobKind::kInference);
}

TEST(JobSpec, MixModelsIsABooleanAndRoundTrips) {
  auto s = parse_job_spec_yaml(
      "name: g\nqueue: q\ncommand: [x]\ntasks: 2\nresources: {gpus: 8, gpu_models: [H100-80GB-SXM, A100-80GB], mix_models: true}\n");
  ASSERT_TRUE(s.ok()) << s.error().message;
  EXPECT_TRUE(s->task.mix_models);
  auto back = job_spec_from_json(job_spec_to_json(*s));
  ASSERT_TRUE(back.ok());
  EXPECT_TRUE(back->task.mix_models);
  auto plain = parse_job_spec_json(R"({"name": "g", "queue": "q", "command": ["x"], "resources": {"gpus": 8}})");
  ASSERT_TRUE(plain.ok());
  EXPECT_FALSE(plain->task.mix_models) << "one model per gang unless asked";
  auto bad = parse_job_spec_json(R"({"name": "g", "queue": "q", "command": ["x"], "resources": {"mix_models": "yes"}})");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("resources.mix_models"), std::string::npos) << bad.error().message;
}

TEST(JobSpec, RoundTrip) {
  for (const char* text : {kFullJson,
                           R"({"name": "s", "queue": "q", "command": ["x"], "resources": {"gpu_milli": 250}})",
                           R"({"name": "m", "queue": "q", "command": ["x"], "resources": {"mig": "1g.10gb"},
                               "topology": {"mode": "preferred", "level": "node"}})",
                           R"({"name": "c", "queue": "q", "command": ["x"]})"}) {
    auto s = parse_job_spec_json(text);
    ASSERT_TRUE(s.ok()) << s.error().message;
    const nlohmann::json j = job_spec_to_json(*s);
    auto back = job_spec_from_json(j);
    ASSERT_TRUE(back.ok()) << back.error().message << "\n" << j.dump();
    EXPECT_TRUE(*back == *s) << j.dump();
    EXPECT_EQ(job_spec_to_json(*back), j);
    auto again = parse_job_spec_json(j.dump());
    ASSERT_TRUE(again.ok());
    EXPECT_TRUE(*again == *s);
  }
  const nlohmann::json canon = job_spec_to_json(*parse_job_spec_json(kFullJson));
  EXPECT_EQ(canon["resources"]["cpu"], "16000m");
  EXPECT_EQ(canon["resources"]["memory"], 65536);
  EXPECT_EQ(canon["max_runtime"], 86400);
}

TEST(JobSpec, YamlScalarsAreTyped) {
  // A quoted number is a string: rejected where an integer is expected.
  auto r = parse_job_spec_yaml("name: j\nqueue: q\ncommand: [x]\ntasks: '4'\n");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message, "tasks: must be an integer, got string");
  r = parse_job_spec_yaml("name: j\nqueue: q\ncommand: [x]\nspot_tolerant: 'true'\n");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message, "spot_tolerant: must be true or false, got string");
  // A plain word where a string is expected is a string; a plain number is not.
  r = parse_job_spec_yaml("name: 123\nqueue: q\ncommand: [x]\n");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message, "name: must be a string, got integer (quote it in YAML)");
  r = parse_job_spec_yaml("name: j\nqueue: q\ncommand: [sleep, 10]\n");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message, "command[1]: must be a string, got integer (quote it in YAML)");
  r = parse_job_spec_yaml("name: '123'\nqueue: q\ncommand: [x]\n");
  EXPECT_TRUE(r.ok()) << r.error().message;
}

struct Bad {
  const char* text;    // JSON unless yaml
  const char* field;   // the error must contain this (the field path and why)
  bool yaml = false;
};

std::string spec_with(const std::string& extra) {
  return R"({"name": "j", "queue": "q", "command": ["x"])" + (extra.empty() ? "" : ", " + extra) + "}";
}

TEST(JobSpec, RestartPolicy) {
  auto d = parse_job_spec_json(spec_with(""));
  ASSERT_TRUE(d.ok()) << d.error().message;
  EXPECT_EQ(d->restart.max_restarts, 3);
  EXPECT_EQ(d->restart.backoff, 10);
  auto s = parse_job_spec_yaml("name: x\nqueue: q\ncommand: [a]\nrestart: {max_restarts: 0, backoff: 2m}\n");
  ASSERT_TRUE(s.ok()) << s.error().message;
  EXPECT_EQ(s->restart.max_restarts, 0);
  EXPECT_EQ(s->restart.backoff, 120);
  auto back = job_spec_from_json(job_spec_to_json(*s));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, *s);
  JobSpec other = *s;
  other.restart.backoff = 121;
  EXPECT_FALSE(other == *s);
}

TEST(JobSpec, BadSpecsNameTheField) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {spec_with(R"("resources": {"gpus": -1})"), "resources.gpus: must be in 0..64, got -1"},
      {spec_with(R"("resources": {"gpus": 65})"), "resources.gpus: must be in 0..64"},
      {spec_with(R"("resources": {"gpus": 20})"), "resources.gpus: at most 16 GPUs per task"},
      {spec_with(R"("resources": {"gpus": 1.5})"), "resources.gpus: must be an integer"},
      {spec_with(R"("resources": {"mig": "9g.99gb"})"), "resources.mig: unknown MIG profile \"9g.99gb\"; known: 1g.10gb"},
      {spec_with(R"("resources": {"mig": "3g.40gb", "gpus": 1})"), "resources: mig and gpus are exclusive"},
      {spec_with(R"("resources": {"mig": "3g.40gb", "gpu_milli": 500})"), "resources.mig: cannot be combined"},
      {spec_with(R"("resources": {"gpu_milli": 0})"), "resources.gpu_milli: must be in 1..1000, got 0"},
      {spec_with(R"("resources": {"gpu_milli": 1001})"), "resources.gpu_milli: must be in 1..1000, got 1001"},
      {spec_with(R"("resources": {"gpu": 1})"),
       "resources.gpu: unknown field; expected one of gpus, gpu_models, mix_models, mig, gpu_milli, gpu_memory, cpu, memory"},
      {spec_with(R"("gpus": 1)"), "gpus: unknown field; expected one of name, queue"},
      {spec_with(R"("restart": 3)"), "restart: must be a map like {max_restarts: 3, backoff: 10}"},
      {spec_with(R"("restart": {"max_restart": 3})"), "restart.max_restart: unknown field; expected one of max_restarts, backoff"},
      {spec_with(R"("restart": {"max_restarts": -1})"), "restart.max_restarts: must be in 0..1000, got -1"},
      {spec_with(R"("restart": {"backoff": "2h"})"), "restart.backoff:"},
      {spec_with(R"("checkpoint": {"every": 5})"), "checkpoint.every: unknown field"},
      {spec_with(R"("tasks": "4")"), "tasks: must be an integer, got string"},
      {spec_with(R"("tasks": 0)"), "tasks: must be in 1..100000, got 0"},
      {spec_with(R"("tasks": 100001)"), "tasks: must be in 1..100000"},
      {spec_with(R"("tasks": 2, "min_tasks": 3)"), "min_tasks: must be in 0..tasks (2), got 3"},
      {spec_with(R"("tasks": 99999999999999999999)"), "tasks: must be an integer"},
      {spec_with(R"("tasks": 18446744073709551615)"), "tasks: must be in 1..100000"},
      {spec_with(R"("expected_runtime": 1e309)"), "spec: not valid JSON: number overflow parsing '1e309'"},
      {spec_with(R"("expected_runtime": 1.5)"), "expected_runtime: must be an integer, got number with a fraction"},
      {spec_with(R"("resources": {"memory": "64Gb"})"), "resources.memory: must be an integer number of MiB"},
      {spec_with(R"("resources": {"memory": -5})"), "resources.memory: must be in 0.."},
      {spec_with(R"("resources": {"memory": "99999999999999999Ti"})"), "resources.memory: \"99999999999999999Ti\" is too large"},
      {spec_with(R"("resources": {"cpu": -1})"), "resources.cpu: must be in 0..1000000, got -1"},
      {spec_with(R"("resources": {"cpu": "1.5"})"), "resources.cpu: must be an integer number of cores"},
      {spec_with(R"("resources": {"gpu_memory": "1Pi"})"), "resources.gpu_memory: must be an integer number of MiB"},
      {spec_with(R"("resources": {"gpu_models": ["Z9000"]})"), "resources.gpu_models[0]: "},
      {spec_with(R"("resources": {"gpu_models": "A100-80GB"})"), "resources.gpu_models: must be a list"},
      {spec_with(R"("max_runtime": "2w")"), "max_runtime: must be integer seconds or a string like \"90s\""},
      {spec_with(R"("max_runtime": -1)"), "max_runtime: must be in 0.."},
      {spec_with(R"("expected_runtime": "99999999999999999d")"), "expected_runtime: \"99999999999999999d\" is too long"},
      {spec_with(R"("checkpoint": {"signal": "SIGKILL"})"),
       "checkpoint.signal: unknown signal \"SIGKILL\"; expected one of SIGUSR1, SIGUSR2, SIGTERM, SIGINT, SIGHUP"},
      {spec_with(R"("checkpoint": {"grace": 86401})"), "checkpoint.grace: must be in 0..86400, got 86401"},
      {spec_with(R"("checkpoint": {"dir": "ckpt"})"), "checkpoint.dir: must be an absolute path"},
      {spec_with(R"("working_dir": "work")"), "working_dir: must be an absolute path"},
      {spec_with(R"("env": {"1BAD": "x"})"), "env.1BAD: bad variable name"},
      {spec_with(R"("env": {"A-B": "x"})"), "env.A-B: bad variable name"},
      {spec_with(R"("env": {"A": 1})"), "env.A: must be a string, got integer"},
      {spec_with(R"("env": ["A=1"])"), "env: must be an object"},
      {spec_with(R"("kind": "service")"), "kind: unknown \"service\"; expected one of training, inference, interactive, batch"},
      {spec_with(R"("topology": {"mode": "always", "level": "leaf"})"), "topology.mode: must be required or preferred"},
      {spec_with(R"("topology": {"mode": "required"})"), "topology.level: required"},
      {spec_with(R"("spot_tolerant": 1)"), "spot_tolerant: must be true or false, got integer"},
      {spec_with(R"("project": 7)"), "project: must be a string, got integer"},
      {R"({"name": "j", "queue": "q", "command": []})", "command: must not be empty"},
      {R"({"name": "j", "queue": "q", "command": [""]})", "command[0]: the program must not be empty"},
      {R"({"name": "j", "queue": "q", "command": ["x", 3]})", "command[1]: must be a string, got integer"},
      {R"({"name": "j", "queue": "q", "command": "python train.py"})", "command: must be a list of strings"},
      {R"({"name": "j", "queue": "q"})", "command: required"},
      {R"({"queue": "q", "command": ["x"]})", "name: required"},
      {R"({"name": "a b", "queue": "q", "command": ["x"]})", "name: \"a b\" has characters outside [A-Za-z0-9._-]"},
      {R"({"name": "j", "queue": "", "command": ["x"]})", "queue: must not be empty"},
      {R"({"name": "j", "queue": "a b", "command": ["x"]})", "queue: \"a b\" has characters outside"},
      {R"([1, 2])", "spec: must be an object"},
      {R"("just a string")", "spec: must be an object"},
      {R"({"name": "j", )", "spec: not valid JSON at byte"},
      {"", "spec: not valid JSON at byte"},
  };
  for (const auto& [text, want] : cases) {
    auto r = parse_job_spec_json(text);
    ASSERT_FALSE(r.ok()) << "parsed: " << text;
    EXPECT_NE(r.error().message.find(want), std::string::npos) << "spec: " << text << "\nerror: " << r.error().message
                                                               << "\nwanted: " << want;
  }
  EXPECT_GE(cases.size(), 30u);
}

TEST(JobSpec, BadYamlSpecsNameTheField) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"name: j\nqueue: q\ncommand: [x]\nresources: {gpus: -1}\n", "resources.gpus: must be in 0..64, got -1"},
      {"name: j\nqueue: q\ncommand: [x]\nresources:\n  gpu: 1\n", "resources.gpu: unknown field"},
      {"name: j\nqueue: q\ncommand: [x]\nresources: {cpu: 1.5}\n", "resources.cpu: must be an integer"},
      {"name: j\nqueue: q\ncommand: [x]\ntasks: 99999999999999999999\n", "tasks: must be an integer"},
      {"name: j\nqueue: q\ncommand: [x]\nname: k\n", "name: given twice"},
      {"name: j\nqueue: q\ncommand: [x\n", "spec: not valid YAML at line"},
      {"name: j\n  queue: q: r\n", "spec: not valid YAML at line"},
      {"- a\n- b\n", "spec: must be an object"},
      {"", "spec: must be an object"},
      {"a: &x [*x]\n", "nested too deeply"},
      {"name: j\nqueue: q\ncommand: [\"a\xc3\"]\n", "command[0]: must be valid UTF-8"},
      {"name: j\nqueue: q\ncommand: [x]\nproject: \"\xed\xa0\x80\"\n", "project: must be valid UTF-8"},
  };
  for (const auto& [text, want] : cases) {
    auto r = parse_job_spec_yaml(text);
    ASSERT_FALSE(r.ok()) << "parsed: " << text;
    EXPECT_NE(r.error().message.find(want), std::string::npos) << "spec: " << text << "\nerror: " << r.error().message
                                                               << "\nwanted: " << want;
  }
}

TEST(JobSpec, SizeLimits) {
  nlohmann::json j = {{"name", "j"}, {"queue", "q"}};
  j["command"] = std::vector<std::string>(kMaxCommandArgs + 1, "a");
  auto r = job_spec_from_json(j);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("command: too many arguments: 4097; at most 4096"), std::string::npos);
  j["command"] = std::vector<std::string>(kMaxCommandArgs, "a");
  EXPECT_TRUE(job_spec_from_json(j).ok());
  j["command"] = {std::string(kMaxStringBytes + 1, 'a')};
  r = job_spec_from_json(j);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("command[0]: too long"), std::string::npos) << r.error().message;
  j["command"] = {"x"};
  for (size_t i = 0; i <= kMaxEnvVars; ++i) j["env"]["V" + std::to_string(i)] = "1";
  r = job_spec_from_json(j);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("env: too many variables"), std::string::npos) << r.error().message;
  j.erase("env");
  j["name"] = std::string(129, 'n');
  r = job_spec_from_json(j);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("name: too long: 129 bytes; at most 128"), std::string::npos) << r.error().message;
}

}  // namespace
}  // namespace tessera::config

namespace tessera::config {
namespace {

TEST(JobSpec, SpotPolicy) {
  const std::string base = R"("name": "j", "queue": "q", "command": ["x"])";
  auto parse = [&](const std::string& extra) { return parse_job_spec_json("{" + base + extra + "}"); };
  auto d = parse("");
  ASSERT_TRUE(d.ok());
  EXPECT_FALSE(d->spot.has_value());
  EXPECT_FALSE(d->gang().spot.has_value());  // the default by kind and checkpointing
  auto p = parse(R"(, "spot": "preferred", "checkpoint": {"interval": 600})");
  ASSERT_TRUE(p.ok()) << p.error().message;
  EXPECT_EQ(p->spot, SpotPolicy::kPreferred);
  EXPECT_EQ(p->gang().spot, SpotPolicy::kPreferred);
  auto t = parse(R"(, "spot_tolerant": true)");  // the older form: spot allowed
  ASSERT_TRUE(t.ok());
  EXPECT_FALSE(t->spot.has_value());
  EXPECT_EQ(t->gang().spot, SpotPolicy::kAllowed);
  auto n = parse(R"(, "spot": "never")");
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(n->gang().spot, SpotPolicy::kNever);
  for (const char* extra : {"", R"(, "spot": "allowed")", R"(, "spot": "never")", R"(, "spot_tolerant": true)"}) {
    auto s = parse(extra);
    ASSERT_TRUE(s.ok());
    auto back = job_spec_from_json(job_spec_to_json(*s));
    ASSERT_TRUE(back.ok()) << back.error().message;
    EXPECT_TRUE(*back == *s) << extra;
  }
  EXPECT_EQ(job_spec_to_json(*p)["spot"], "preferred");
  EXPECT_TRUE(job_spec_to_json(*d)["spot"].is_null());
  auto y = parse_job_spec_yaml("name: j\nqueue: q\ncommand: [x]\nspot: allowed\n");
  ASSERT_TRUE(y.ok()) << y.error().message;
  EXPECT_EQ(y->spot, SpotPolicy::kAllowed);
  auto bad = parse(R"(, "spot": "sometimes")");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().message.rfind("spot: must be never, allowed or preferred, got 'sometimes'", 0), 0u)
      << bad.error().message;
  auto clash = parse(R"(, "spot": "never", "spot_tolerant": true)");
  ASSERT_FALSE(clash.ok());
  EXPECT_NE(clash.error().message.find("spot: never contradicts spot_tolerant: true"), std::string::npos);
  auto typed = parse(R"(, "spot": true)");
  ASSERT_FALSE(typed.ok());
  EXPECT_EQ(typed.error().message.rfind("spot: must be a string", 0), 0u) << typed.error().message;
}

TEST(JobSpec, SecretEnvIsMergedMarkedAndRedactedForPeople) {
  auto s = parse_job_spec_yaml("name: j\nqueue: q\ncommand: [x]\nenv: {A: a}\nsecret_env: {TOKEN: t0ps3cret}\n");
  ASSERT_TRUE(s.ok()) << s.error().message;
  EXPECT_EQ(s->env.at("TOKEN"), "t0ps3cret");  // the task gets it
  EXPECT_EQ(s->secret_env, std::set<std::string>{"TOKEN"});
  // The store's form keeps the value and the mark; it reads back equal.
  const nlohmann::json stored = job_spec_to_json(*s);
  auto back = job_spec_from_json(stored);
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ(*back, *s);
  // People's form hides it.
  nlohmann::json shown = stored;
  redact_secrets(shown);
  EXPECT_EQ(shown["env"]["TOKEN"], "(secret)");
  EXPECT_EQ(shown["env"]["A"], "a");
  EXPECT_EQ(shown.dump().find("t0ps3cret"), std::string::npos);
  // A name in both, or a list naming what env lacks, is refused with the field.
  auto both = parse_job_spec_yaml("name: j\nqueue: q\ncommand: [x]\nenv: {A: a}\nsecret_env: {A: b}\n");
  ASSERT_FALSE(both.ok());
  EXPECT_EQ(both.error().message.rfind("secret_env.A:", 0), 0u) << both.error().message;
  auto missing = parse_job_spec_json(R"({"name": "j", "queue": "q", "command": ["x"], "secret_env": ["NOPE"]})");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().message.rfind("secret_env[0]:", 0), 0u) << missing.error().message;
}

}  // namespace
}  // namespace tessera::config

namespace tessera::config {
namespace {

// Tasks that differ: "tasks" as a list of per-task sizes (a launcher without GPUs beside workers).
TEST(JobSpecTaskSizes, ListedTasksTakeResourcesAsDefaultsAndReachTheGang) {
  auto s = parse_job_spec_yaml(
      "name: mpi\nqueue: q\ncommand: [x]\nresources: {gpus: 8, cpu: 32, memory: 256Gi}\n"
      "tasks: [{gpus: 0, cpu: 2, memory: 4Gi}, {}, {gpus: 4}]\ntopology: {mode: required, level: leaf}\n");
  ASSERT_TRUE(s.ok()) << s.error().message;
  EXPECT_EQ(s->tasks, 3);
  ASSERT_EQ(s->task_sizes.size(), 3u);
  EXPECT_EQ(s->task_sizes[0], (TaskSize{MilliCpu(2000), MiB(4096), 0}));
  EXPECT_EQ(s->task_sizes[1], (TaskSize{MilliCpu(32000), MiB(262144), 8}));
  EXPECT_EQ(s->task_sizes[2], (TaskSize{MilliCpu(32000), MiB(262144), 4}));
  const Gang g = s->gang();
  EXPECT_TRUE(g.varied());
  EXPECT_EQ(g.total_gpus(), 12);
  EXPECT_EQ(g.request(0).gpu_count, 0);
  EXPECT_EQ(g.request(0).cpu.v, 2000);
  EXPECT_TRUE(g.validate().ok()) << g.validate().message();
  // Canonical round trip keeps every size.
  const nlohmann::json j = job_spec_to_json(*s);
  ASSERT_TRUE(j["tasks"].is_array());
  EXPECT_EQ(j["tasks"][0]["cpu"], "2000m");
  auto back = job_spec_from_json(j);
  ASSERT_TRUE(back.ok()) << back.error().message << "\n" << j.dump();
  EXPECT_TRUE(*back == *s) << j.dump();
  EXPECT_EQ(job_spec_to_json(*back), j);
  // A uniform spec still writes an integer.
  EXPECT_TRUE(job_spec_to_json(*parse_job_spec_json(R"({"name": "u", "queue": "q", "command": ["x"], "tasks": 2})"))["tasks"].is_number());
}

TEST(JobSpecTaskSizes, BadListsNameTheField) {
  auto with = [](const std::string& extra) {
    return std::string(R"({"name": "j", "queue": "q", "command": ["x"], )") + extra + "}";
  };
  const std::vector<std::pair<std::string, std::string>> cases = {
      {with(R"("tasks": [])"), "tasks: a list of task sizes holds 1..1024 entries, got 0"},
      {with(R"("tasks": [{"gpus": 1}, 3])"), "tasks[1]: must be"},
      {with(R"("tasks": [{"gpu": 1}])"), "tasks[0].gpu: unknown field; expected one of gpus, cpu, memory"},
      {with(R"("tasks": [{"gpus": 17}])"), "tasks[0].gpus: must be in 0..16, got 17"},
      {with(R"("tasks": [{"gpus": -1}])"), "tasks[0].gpus: must be in 0..16, got -1"},
      {with(R"("tasks": [{"cpu": "lots"}])"), "tasks[0].cpu"},
      {with(R"("tasks": [{"memory": -4}])"), "tasks[0].memory"},
      {with(R"("tasks": [{"gpus": 1}, {"gpus": 2}], "min_tasks": 1)"), "min_tasks: a gang whose tasks differ starts whole"},
      {with(R"("tasks": [{}, {}], "resources": {"mig": "1g.10gb"})"), "tasks: tasks that differ ask whole GPUs or none"},
      {with(R"("tasks": [{"gpus": 1}], "resources": {"gpu_milli": 500})"), "tasks: tasks that differ ask whole GPUs or none"},
  };
  for (const auto& [text, want] : cases) {
    auto r = parse_job_spec_json(text);
    ASSERT_FALSE(r.ok()) << text;
    EXPECT_NE(r.error().message.find(want), std::string::npos) << text << "\n  got: " << r.error().message;
  }
}

}  // namespace
}  // namespace tessera::config
