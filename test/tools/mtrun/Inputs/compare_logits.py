"""Prints whether two --dump-logits files have the same shape and agree within a tolerance
(argument 3, default 1e-5)."""
import sys

import numpy as np

a, b = np.load(sys.argv[1]), np.load(sys.argv[2])
tolerance = float(sys.argv[3]) if len(sys.argv) > 3 else 1e-5
if a.shape != b.shape:
    print("shapes differ:", a.shape, b.shape)
    sys.exit(0)
diff = float(np.max(np.abs(a - b))) if a.size else 0.0
print("shape", a.shape, "within %g" % tolerance if diff <= tolerance else "differ by %g" % diff)
