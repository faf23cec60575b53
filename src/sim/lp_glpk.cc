// LinearProgram on GLPK (when built with it; see src/sim/CMakeLists.txt).
#include "sim/lp.h"

#ifdef TESSERA_HAVE_GLPK
#include <glpk.h>
#endif

namespace tessera::sim {

#ifdef TESSERA_HAVE_GLPK
struct LinearProgram::Impl {
  glp_prob* lp = nullptr;
  bool loaded = false;  // the matrix is in lp; later solves reuse the basis
  ~Impl() {
    if (lp) glp_delete_prob(lp);
  }
};

bool lp_available() { return true; }
std::string lp_solver_name() { return std::string("GLPK ") + glp_version(); }
#else
struct LinearProgram::Impl {};
bool lp_available() { return false; }
std::string lp_solver_name() { return "none (built without GLPK: apt install libglpk-dev, then rebuild)"; }
#endif

LinearProgram::LinearProgram() : impl_(std::make_unique<Impl>()) {}
LinearProgram::~LinearProgram() = default;

int LinearProgram::add_column(double objective, double upper, bool integer) {
  objective_.push_back(objective);
  col_upper_.push_back(upper);
  integer_.push_back(integer);
  return int(objective_.size()) - 1;
}

int LinearProgram::add_row(const std::vector<Term>& terms, double upper) {
  const int row = int(row_upper_.size());
  row_upper_.push_back(upper);
  for (const Term& t : terms)
    if (t.coef != 0) {
      ia_.push_back(row + 1);
      ja_.push_back(t.col + 1);
      ar_.push_back(t.coef);
    }
#ifdef TESSERA_HAVE_GLPK
  if (impl_->loaded) {  // after a solve: into the loaded problem too (a new row starts basic)
    const int i = glp_add_rows(impl_->lp, 1);
    glp_set_row_bnds(impl_->lp, i, GLP_UP, 0.0, upper);
    std::vector<int> ind{0};  // 1-based
    std::vector<double> val{0};
    for (const Term& t : terms)
      if (t.coef != 0) ind.push_back(t.col + 1), val.push_back(t.coef);
    glp_set_mat_row(impl_->lp, i, int(ind.size()) - 1, ind.data(), val.data());
  }
#endif
  return row;
}

void LinearProgram::set_row_upper(int row, double upper) {
  row_upper_[size_t(row)] = upper;
#ifdef TESSERA_HAVE_GLPK
  if (impl_->loaded) glp_set_row_bnds(impl_->lp, row + 1, GLP_UP, 0.0, upper);
#endif
}

double LinearProgram::value(int col) const { return col >= 0 && size_t(col) < values_.size() ? values_[size_t(col)] : 0; }

Result<double> LinearProgram::solve() {
#ifndef TESSERA_HAVE_GLPK
  return Error{ErrorCode::kFailedPrecondition, "no LP solver: " + lp_solver_name()};
#else
  Impl& m = *impl_;
  bool mip = false;
  if (!m.loaded) {
    glp_term_out(GLP_OFF);  // this thread's GLPK says nothing on the terminal
    m.lp = glp_create_prob();
    glp_set_obj_dir(m.lp, GLP_MAX);
    if (!row_upper_.empty()) glp_add_rows(m.lp, int(row_upper_.size()));
    for (size_t r = 0; r < row_upper_.size(); ++r) glp_set_row_bnds(m.lp, int(r) + 1, GLP_UP, 0.0, row_upper_[r]);
    if (!objective_.empty()) glp_add_cols(m.lp, int(objective_.size()));
    for (size_t c = 0; c < objective_.size(); ++c) {
      const int j = int(c) + 1;
      if (col_upper_[c] >= 0) glp_set_col_bnds(m.lp, j, col_upper_[c] > 0 ? GLP_DB : GLP_FX, 0.0, col_upper_[c]);
      else glp_set_col_bnds(m.lp, j, GLP_LO, 0.0, 0.0);
      glp_set_obj_coef(m.lp, j, objective_[c]);
      if (integer_[c]) glp_set_col_kind(m.lp, j, GLP_IV);
    }
    // GLPK's arrays are 1-based: element 0 is ignored.
    std::vector<int> ia{0}, ja{0};
    std::vector<double> ar{0};
    ia.insert(ia.end(), ia_.begin(), ia_.end());
    ja.insert(ja.end(), ja_.begin(), ja_.end());
    ar.insert(ar.end(), ar_.begin(), ar_.end());
    glp_load_matrix(m.lp, int(ar_.size()), ia.data(), ja.data(), ar.data());
    glp_scale_prob(m.lp, GLP_SF_AUTO);
    m.loaded = true;
  }
  for (bool b : integer_) mip = mip || b;
  glp_smcp sp;
  glp_init_smcp(&sp);
  sp.msg_lev = GLP_MSG_OFF;
  sp.presolve = GLP_OFF;  // keeps the basis for the next solve
  if (const int rc = glp_simplex(m.lp, &sp); rc != 0) {
    // A stale or singular basis: start over from the standard one.
    glp_std_basis(m.lp);
    if (glp_simplex(m.lp, &sp) != 0) return Error{ErrorCode::kInternal, "GLPK simplex failed (code " + std::to_string(rc) + ")"};
  }
  if (glp_get_status(m.lp) != GLP_OPT) return Error{ErrorCode::kInternal, "GLPK: the LP has no optimal solution"};
  double obj = glp_get_obj_val(m.lp);
  values_.assign(objective_.size(), 0);
  if (mip) {
    glp_iocp ip;
    glp_init_iocp(&ip);
    ip.msg_lev = GLP_MSG_OFF;
    if (const int rc = glp_intopt(m.lp, &ip); rc != 0) return Error{ErrorCode::kInternal, "GLPK branch and bound failed (code " + std::to_string(rc) + ")"};
    if (glp_mip_status(m.lp) != GLP_OPT) return Error{ErrorCode::kInternal, "GLPK: no integer optimum found"};
    obj = glp_mip_obj_val(m.lp);
    for (size_t c = 0; c < objective_.size(); ++c) values_[c] = glp_mip_col_val(m.lp, int(c) + 1);
  } else {
    for (size_t c = 0; c < objective_.size(); ++c) values_[c] = glp_get_col_prim(m.lp, int(c) + 1);
  }
  return obj;
#endif
}

}  // namespace tessera::sim
