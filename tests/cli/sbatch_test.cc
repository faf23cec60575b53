// #SBATCH translation (src/cli/sbatch.h): a real-world fine-tuning script, the per-node to per-task
// arithmetic, the options Tessera uses and those it reports as ignored, and the errors.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "cli/sbatch.h"

namespace tessera::cli {
namespace {

using nlohmann::json;

const std::vector<std::string> kModels = {"A100-40GB", "A100-80GB", "H100-80GB-SXM", "H100-80GB-PCIE", "T4"};

std::string read(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

SbatchContext ctx(const std::string& name = "job.sh", std::vector<std::string> args = {}) {
  SbatchContext c;
  c.script_name = name;
  c.args = std::move(args);
  c.gpu_models = kModels;
  c.cwd = "/home/alice/proj";
  c.now = 1767225600;  // 2026-01-01T00:00:00Z
  return c;
}

bool ignored(const SbatchTranslation& t, int line, const std::string& starts, const std::string& why_part) {
  for (const auto& n : t.ignored)
    if (n.line == line && n.text.rfind(starts, 0) == 0 && n.why.find(why_part) != std::string::npos) return true;
  return false;
}

TEST(Sbatch, RealWorldFineTuningScript) {
  const std::string text = read(TESSERA_SOURCE_DIR "/tests/cli/data/llama_finetune.sbatch");
  ASSERT_FALSE(text.empty());
  ASSERT_TRUE(has_sbatch_lines(text));
  auto t = translate_sbatch(text, ctx("llama_finetune.sbatch", {"--epochs", "3"}));
  ASSERT_TRUE(t.ok()) << t.error().message;
  const json& s = t->spec;
  EXPECT_EQ(s["name"], "llama-ft");
  EXPECT_EQ(s["queue"], "team-a");
  EXPECT_EQ(s["project"], "nlp");
  // 2 nodes x 4 tasks; gpu:a100:4 per node over 4 tasks per node = 1 GPU each; 256G per node / 4.
  EXPECT_EQ(s["tasks"], 8);
  EXPECT_EQ(s["resources"]["gpus"], 1);
  EXPECT_EQ(s["resources"]["gpu_models"], json({"A100-40GB", "A100-80GB"}));
  EXPECT_EQ(s["resources"]["cpu"], 8);
  EXPECT_EQ(s["resources"]["memory"], 64 * 1024);
  EXPECT_EQ(s["max_runtime"], 36 * 3600);
  EXPECT_EQ(s["output"], "/home/alice/proj/logs/%x-%j.out");
  EXPECT_EQ(s["error"], "/home/alice/proj/logs/%x-%j.err");
  EXPECT_FALSE(s.contains("array"));  // after the first command: sbatch does not read it either
  EXPECT_FALSE(s.contains("working_dir"));
  // The script runs as bash -c TEXT NAME ARGS.
  ASSERT_TRUE(s["command"].is_array());
  EXPECT_EQ(s["command"][0], "/bin/bash");
  EXPECT_EQ(s["command"][1], "-c");
  EXPECT_EQ(s["command"][2], text);
  EXPECT_EQ(s["command"][3], "llama_finetune.sbatch");
  EXPECT_EQ(s["command"][4], "--epochs");
  EXPECT_EQ(s["command"][5], "3");
  // What was ignored, each with why.
  EXPECT_TRUE(ignored(*t, 14, "--mail-type", "e-mail"));
  EXPECT_TRUE(ignored(*t, 15, "--mail-user", "e-mail"));
  EXPECT_TRUE(ignored(*t, 16, "--exclusive", "GPUs are never shared"));
  EXPECT_TRUE(ignored(*t, 17, "--constraint", "--models"));
  EXPECT_TRUE(ignored(*t, 23, "#SBATCH --array=0-3", "after the first command"));
  EXPECT_EQ(t->ignored.size(), 5u);  // ##SBATCH is a comment, not an option
  ASSERT_EQ(t->notes.size(), 1u);
  EXPECT_NE(t->notes[0].find("--chdir"), std::string::npos);
}

TEST(Sbatch, ShortOptionsAndSlurmWorkflowFields) {
  const std::string text =
      "#!/bin/sh\n"
      "#SBATCH -J sweep -p research -N 1 -n 2\n"
      "#SBATCH -G 4 -c 4 --mem-per-cpu=2G\n"
      "#SBATCH -t 90 -a 0-9%2 -d afterok:12:13_2,singleton\n"
      "#SBATCH --kill-on-invalid-dep=yes --hold --begin=now+1h\n"
      "#SBATCH -o /scratch/%A_%a.out -D /work/sweep --export=ALL,EPOCHS=3\n"
      "python sweep.py\n";
  auto t = translate_sbatch(text, ctx());
  ASSERT_TRUE(t.ok()) << t.error().message;
  const json& s = t->spec;
  EXPECT_EQ(s["name"], "sweep");
  EXPECT_EQ(s["queue"], "research");
  EXPECT_EQ(s["tasks"], 2);
  EXPECT_EQ(s["resources"]["gpus"], 2);       // --gpus 4 in total over 2 tasks
  EXPECT_EQ(s["resources"]["cpu"], 4);
  EXPECT_EQ(s["resources"]["memory"], 8192);  // 2G per CPU x 4
  EXPECT_FALSE(s["resources"].contains("gpu_models"));
  EXPECT_EQ(s["max_runtime"], 90 * 60);       // a bare number is minutes
  EXPECT_EQ(s["array"], "0-9%2");
  EXPECT_EQ(s["dependency"], "afterok:12:13_2,singleton");
  EXPECT_EQ(s["kill_on_invalid_dep"], true);
  EXPECT_EQ(s["hold"], true);
  EXPECT_EQ(s["begin"], 1767225600 + 3600);
  EXPECT_EQ(s["output"], "/scratch/%A_%a.out");
  EXPECT_EQ(s["working_dir"], "/work/sweep");
  EXPECT_EQ(s["env"]["EPOCHS"], "3");
  EXPECT_TRUE(ignored(*t, 6, "--export=ALL", "environment is not copied"));
  EXPECT_TRUE(t->notes.empty());  // --chdir was given
}

TEST(Sbatch, GresPerNodeAndPerTask) {
  // One task per node (torchrun style): gpu:8 per node, 8 GPUs per task.
  auto t = translate_sbatch("#SBATCH --nodes=4\n#SBATCH --gres=gpu:8\necho\n", ctx());
  ASSERT_TRUE(t.ok()) << t.error().message;
  EXPECT_EQ(t->spec["tasks"], 4);
  EXPECT_EQ(t->spec["resources"]["gpus"], 8);
  // --gpus-per-task wins; --mem is per node, over the tasks of a node.
  t = translate_sbatch("#SBATCH --ntasks=4 --ntasks-per-node=2 --nodes=2 --gpus-per-task=h100:2 --mem=100G\n", ctx());
  ASSERT_TRUE(t.ok()) << t.error().message;
  EXPECT_EQ(t->spec["tasks"], 4);
  EXPECT_EQ(t->spec["resources"]["gpus"], 2);
  EXPECT_EQ(t->spec["resources"]["gpu_models"], json({"H100-80GB-SXM", "H100-80GB-PCIE"}));
  EXPECT_EQ(t->spec["resources"]["memory"], 50 * 1024);
  // No task count at all: one task, and no "tasks" field.
  t = translate_sbatch("#SBATCH --gres=gpu:1,nvme:1\n", ctx());
  ASSERT_TRUE(t.ok()) << t.error().message;
  EXPECT_FALSE(t->spec.contains("tasks"));
  EXPECT_EQ(t->spec["resources"]["gpus"], 1);
  EXPECT_TRUE(ignored(*t, 1, "--gres=nvme:1", "only GPUs"));
  // An unknown GPU type is reported, not guessed.
  t = translate_sbatch("#SBATCH --gres=gpu:mi300x:8\n", ctx());
  ASSERT_TRUE(t.ok()) << t.error().message;
  EXPECT_EQ(t->spec["resources"]["gpus"], 8);
  EXPECT_FALSE(t->spec["resources"].contains("gpu_models"));
  EXPECT_TRUE(ignored(*t, 1, "GPU type mi300x", "--models"));
}

TEST(Sbatch, ErrorsNameTheLineAndSayWhatToDo) {
  auto t = translate_sbatch("#!/bin/bash\n#SBATCH --ntasks-per-node=3\n#SBATCH --gres=gpu:8\n", ctx("a.sh"));
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.error().message.find("do not divide among 3 tasks per node"), std::string::npos) << t.error().message;
  EXPECT_NE(t.error().message.find("--gpus-per-task"), std::string::npos);

  t = translate_sbatch("#SBATCH --time=1-xx\n", ctx("a.sh"));
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.error().message.find("a.sh line 1: --time=1-xx"), std::string::npos) << t.error().message;

  t = translate_sbatch("#SBATCH -J\n", ctx("a.sh"));
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.error().message.find("needs a value"), std::string::npos) << t.error().message;

  t = translate_sbatch("#!/usr/bin/env python3\n#SBATCH --gres=gpu:1\nprint(1)\n", ctx("p.py"));
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.error().message.find("only shell batch scripts"), std::string::npos) << t.error().message;

  t = translate_sbatch("#SBATCH --partition=a,b\n", ctx("a.sh"));
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.error().message.find("one partition"), std::string::npos) << t.error().message;

  t = translate_sbatch("#SBATCH --dependency=afterok:1?afterok:2\n", ctx("a.sh"));
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.error().message.find("'?'"), std::string::npos) << t.error().message;
}

TEST(Sbatch, MemoryUnits) {
  EXPECT_EQ(parse_slurm_memory("2048"), 2048);
  EXPECT_EQ(parse_slurm_memory("500M"), 500);
  EXPECT_EQ(parse_slurm_memory("64G"), 65536);
  EXPECT_EQ(parse_slurm_memory("1T"), 1024 * 1024);
  EXPECT_EQ(parse_slurm_memory("1024K"), 1);
  EXPECT_EQ(parse_slurm_memory("1k"), 1);  // rounded up to a MiB
  EXPECT_FALSE(parse_slurm_memory("lots"));
  EXPECT_FALSE(parse_slurm_memory(""));
  EXPECT_FALSE(parse_slurm_memory("-1G"));
}

TEST(Sbatch, DetectsBatchScripts) {
  EXPECT_TRUE(has_sbatch_lines("#!/bin/bash\n#SBATCH -N 1\n"));
  EXPECT_TRUE(has_sbatch_lines("#SBATCH -N 1"));
  EXPECT_FALSE(has_sbatch_lines("#!/bin/bash\necho hi\n"));
  EXPECT_FALSE(has_sbatch_lines("  #SBATCH -N 1\n"));  // sbatch reads only lines that start with it
  EXPECT_FALSE(has_sbatch_lines("##SBATCH -N 1\n"));
}

}  // namespace
}  // namespace tessera::cli
