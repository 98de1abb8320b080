#!/usr/bin/env python3
"""Sets the dtype of a compiled function's buffers of one kind and re-hashes plan.json in
MANIFEST, so the plan still loads: a plan whose kernels disagree with what the runtime
expects of that kind.

  set-buffer-dtype.py PLAN FUNCTION KIND DTYPE     e.g. forward_backward expert_load f32
"""

import importlib.util
import os
import sys


def main():
    plan, function, kind, dtype = sys.argv[1:5]
    spec = importlib.util.spec_from_file_location(
        "drop_plan_function", os.path.join(os.path.dirname(__file__), "drop-plan-function.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)

    def edit(doc):
        fn = doc["kernels"]["x86_64"]["functions"][function]
        for buffer in fn["inputs"] + fn["outputs"]:
            if buffer["kind"] == kind:
                buffer["dtype"] = dtype

    module.rewrite_plan(plan, edit)


if __name__ == "__main__":
    main()
