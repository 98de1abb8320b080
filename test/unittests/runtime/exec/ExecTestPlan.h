//===- ExecTestPlan.h - A small in-memory plan for executor tests -*- C++ -*-===//

#ifndef MTC_TEST_UNITTESTS_RUNTIME_EXEC_EXECTESTPLAN_H
#define MTC_TEST_UNITTESTS_RUNTIME_EXEC_EXECTESTPLAN_H

#include "runtime/plan/Plan.h"

namespace mtc::rt::test {

/// Model `name` with parameters w [rows, 4] (normal) and b [4] (zeros), and Adam moments of w.
inline Plan smallPlan(std::string name = "small", int64_t rows = 3) {
  Plan plan;
  plan.dir = "small.plan";
  plan.model = std::move(name);
  plan.seed = 7;
  plan.planSha256 = std::string(64, 'a');
  ParamInfo w;
  w.name = "w";
  w.tensorId = 0;
  w.dims = {{"rows", rows}, {"cols", 4}};
  w.init = InitSpec{InitKind::Normal, {0.02}};
  ParamInfo b;
  b.name = "b";
  b.tensorId = 1;
  b.dims = {{"cols", 4}};
  plan.params = {w, b};
  for (const char *suffix : {".exp_avg", ".exp_avg_sq"})
    plan.states.push_back(StateInfo{std::string("w") + suffix, "w", 0, w.dims, PlanDType::F32});
  return plan;
}

} // namespace mtc::rt::test

#endif // MTC_TEST_UNITTESTS_RUNTIME_EXEC_EXECTESTPLAN_H
