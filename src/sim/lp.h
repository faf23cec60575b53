// A small linear-program interface over a real solver (GLPK, libglpk-dev), used by the allocation
// bound (alloc_bound.h). Outside core: the scheduler never solves LPs.
// Maximise c'x subject to rows a'x <= up and column bounds; solve() may be called again after
// set_row_upper or add_row (the solver restarts from the last basis). Columns are fixed once solved.
// MIP: columns marked integer are solved by branch and bound (small instances only).
// Thread-safety: one LinearProgram per thread; GLPK keeps its environment per thread.
// Built without GLPK, lp_available() is false and solve() says how to get it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"

namespace tessera::sim {

// True when this binary was built with a solver.
bool lp_available();
// The solver's name and version ("GLPK 5.0"), or why there is none.
std::string lp_solver_name();

class LinearProgram {
 public:
  LinearProgram();
  ~LinearProgram();
  LinearProgram(const LinearProgram&) = delete;
  LinearProgram& operator=(const LinearProgram&) = delete;

  // A column x >= 0 (at most `upper` when upper >= 0) with objective coefficient `objective`.
  int add_column(double objective, double upper = -1, bool integer = false);
  // A row sum(coef * x[col]) <= upper; each column at most once in a row.
  struct Term {
    int col;
    double coef;
  };
  int add_row(const std::vector<Term>& terms, double upper);
  void set_row_upper(int row, double upper);
  int columns() const { return int(objective_.size()); }
  int rows() const { return int(row_upper_.size()); }

  // The optimum of the objective (maximised). kFailedPrecondition without a solver; kInternal when the
  // solver fails (the problem is always feasible: x = 0 is a solution).
  Result<double> solve();
  // Column values of the last solve.
  double value(int col) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::vector<double> objective_, col_upper_, row_upper_;
  std::vector<bool> integer_;
  std::vector<int> ia_, ja_;
  std::vector<double> ar_;
  std::vector<double> values_;
};

}  // namespace tessera::sim
