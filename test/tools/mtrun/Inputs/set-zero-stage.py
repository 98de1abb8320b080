#!/usr/bin/env python3
"""Sets a plan's mesh.zero_stage and re-hashes plan.json in MANIFEST, so the plan still
loads: a stage the compiler would have refused for this plan.

  set-zero-stage.py PLAN STAGE
"""

import importlib.util
import os
import sys


def main():
    plan, stage = sys.argv[1], int(sys.argv[2])
    here = os.path.dirname(os.path.abspath(__file__))
    spec = importlib.util.spec_from_file_location(
        "drop_plan_function", os.path.join(here, "drop-plan-function.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.rewrite_plan(plan, lambda doc: doc["mesh"].__setitem__("zero_stage", stage))


if __name__ == "__main__":
    main()
