// The workflow fields of a job spec: arrays, dependencies, job references, begin, hold, output
// patterns; parsed strictly (errors name the field) and written back unchanged.
#include <gtest/gtest.h>

#include "config/job_spec.h"

namespace tessera::config {
namespace {

TEST(JobSpecWorkflow, ArraysInSlurmSyntax) {
  auto a = parse_array_spec("0-99%8");
  ASSERT_TRUE(a.ok()) << a.error().message;
  EXPECT_EQ(a->indices.size(), 100u);
  EXPECT_EQ(a->max_running, 8);
  a = parse_array_spec("1,3,5-7");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->indices, (std::vector<int32_t>{1, 3, 5, 6, 7}));
  a = parse_array_spec("0-15:4");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->indices, (std::vector<int32_t>{0, 4, 8, 12}));
  for (const char* bad : {"", "5-1", "-1", "0-99%0", "a", "0-20000", "1:2", "0-3:0", "0,,1", "%4", "0-9999999"}) {
    auto r = parse_array_spec(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.error().message.rfind("array: ", 0), 0u) << r.error().message;
  }
}

TEST(JobSpecWorkflow, DependenciesAndReferences) {
  auto d = parse_dependencies("afterok:12:13_2,afterany:14,singleton");
  ASSERT_TRUE(d.ok()) << d.error().message;
  ASSERT_EQ(d->size(), 3u);
  EXPECT_EQ((*d)[0].type, DependencyType::kAfterOk);
  EXPECT_EQ((*d)[0].jobs, (std::vector<JobRef>{{12, -1}, {13, 2}}));
  EXPECT_EQ((*d)[2].type, DependencyType::kSingleton);
  EXPECT_EQ(dependencies_text(*d), "afterok:12:13_2,afterany:14,singleton");
  for (const char* bad : {"afterok", "afterok:", "afterok:x", "before:1", "singleton:3", "afterok:0", "afterok:1_", "afterok:-1",
                          "afterok:1,,afterany:2"}) {
    auto r = parse_dependencies(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.error().message.rfind("dependency: ", 0), 0u) << r.error().message;
  }
  EXPECT_FALSE(parse_job_ref("12_3_4").ok());
  EXPECT_FALSE(parse_job_ref("99999999999").ok());
  EXPECT_EQ(job_ref_text(*parse_job_ref("7_0")), "7_0");
}

TEST(JobSpecWorkflow, TheSpecCarriesThemAndWritesThemBack) {
  auto s = parse_job_spec_yaml(R"(
name: sweep
queue: q
command: [x]
array: "0-9%2"
dependency: "afterok:3"
kill_on_invalid_dep: true
begin: 1798135200
hold: true
output: /shared/%x-%A_%a.out
)");
  ASSERT_TRUE(s.ok()) << s.error().message;
  EXPECT_EQ(s->workflow.array->indices.size(), 10u);
  EXPECT_TRUE(s->workflow.hold);
  EXPECT_EQ(s->workflow.begin, 1798135200);
  auto back = job_spec_from_json(job_spec_to_json(*s));
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ(*back, *s);
  EXPECT_EQ(expand_output_pattern(s->workflow.output, 17, 15, 2, 0, "sweep", "alice"), "/shared/sweep-15_2.out");
  for (const char* bad : {R"("array": 5)", R"("begin": -1)", R"("begin": "tomorrow")", R"("hold": "yes")",
                          R"("output": "relative/%j.out")", R"("output": "/a/../b")", R"("dependency": "afterok")"}) {
    auto r = parse_job_spec_json(std::string(R"({"name": "n", "queue": "q", "command": ["x"], )") + bad + "}");
    EXPECT_FALSE(r.ok()) << bad;
  }
}

}  // namespace
}  // namespace tessera::config
