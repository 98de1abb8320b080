//===- PlanSummary.h - a plan described for people --------------*- C++ -*-===//
//
// The summary `mtrun PLAN --info` and `mtc inspect PLAN` print: model, settings, the
// parameter table and the compiler's predictions.
//
//===----------------------------------------------------------------------===//

#ifndef MTC_RUNTIME_PLAN_PLANSUMMARY_H
#define MTC_RUNTIME_PLAN_PLANSUMMARY_H

#include "runtime/plan/Plan.h"

#include <string>

namespace mtc::rt {

/// Several lines describing a verified plan.
std::string describePlan(const Plan &plan);

} // namespace mtc::rt

#endif // MTC_RUNTIME_PLAN_PLANSUMMARY_H
