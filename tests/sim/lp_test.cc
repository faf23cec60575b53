// LinearProgram (sim/lp.h) on GLPK: an LP with a known vertex optimum, a warm-started re-solve after
// a bound changes and after a row is added, and the same program with integer columns.
#include <gtest/gtest.h>

#include "sim/lp.h"

namespace tessera::sim {
namespace {

// max x + y  s.t.  x + 2y <= 4,  3x + y <= 6,  x, y >= 0.
TEST(LinearProgram, SolvesReSolvesAndBranches) {
  if (!lp_available()) GTEST_SKIP() << "no LP solver in this build (" << lp_solver_name() << ")";
  EXPECT_NE(lp_solver_name().find("GLPK"), std::string::npos);
  LinearProgram lp;
  const int x = lp.add_column(1), y = lp.add_column(1);
  const int r1 = lp.add_row({{x, 1}, {y, 2}}, 4);
  lp.add_row({{x, 3}, {y, 1}}, 6);
  EXPECT_EQ(lp.columns(), 2);
  EXPECT_EQ(lp.rows(), 2);
  auto v = lp.solve();
  ASSERT_TRUE(v.ok()) << v.error().message;
  EXPECT_NEAR(*v, 2.8, 1e-9);
  EXPECT_NEAR(lp.value(x), 1.6, 1e-9);
  EXPECT_NEAR(lp.value(y), 1.2, 1e-9);
  EXPECT_EQ(lp.value(7), 0);  // no such column
  lp.set_row_upper(r1, 2);  // x + 2y <= 2: the optimum moves to x = 2, y = 0
  v = lp.solve();
  ASSERT_TRUE(v.ok());
  EXPECT_NEAR(*v, 2.0, 1e-9);
  lp.set_row_upper(r1, 4);
  EXPECT_NEAR(*lp.solve(), 2.8, 1e-9);
  lp.add_row({{x, 1}, {y, 1}}, 2);  // a row added after a solve: x + y <= 2
  EXPECT_EQ(lp.rows(), 3);
  v = lp.solve();
  ASSERT_TRUE(v.ok()) << v.error().message;
  EXPECT_NEAR(*v, 2.0, 1e-9);
  EXPECT_NEAR(lp.value(x) + lp.value(y), 2.0, 1e-9);

  LinearProgram ip;  // the same with whole numbers: 2 (e.g. x = 2, y = 0)
  const int a = ip.add_column(1, -1, true), b = ip.add_column(1, -1, true);
  ip.add_row({{a, 1}, {b, 2}}, 4);
  ip.add_row({{a, 3}, {b, 1}}, 6);
  auto w = ip.solve();
  ASSERT_TRUE(w.ok()) << w.error().message;
  EXPECT_NEAR(*w, 2.0, 1e-9);
  EXPECT_NEAR(ip.value(a) + ip.value(b), 2.0, 1e-9);

  LinearProgram capped;  // a column bound: x <= 0.5
  const int c = capped.add_column(3, 0.5);
  capped.add_row({{c, 1}}, 10);
  EXPECT_NEAR(*capped.solve(), 1.5, 1e-9);
}

}  // namespace
}  // namespace tessera::sim
