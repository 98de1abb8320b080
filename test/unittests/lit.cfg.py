# -*- Python -*-
# Runs every GoogleTest binary named *Tests under the unittests build folder.
import os

import lit.formats

config.name = "mtc-unittests"
config.test_source_root = config.unittest_dir
config.test_exec_root = config.unittest_dir
config.test_format = lit.formats.GoogleTest(".", "Tests")
# The binaries run side by side: kernels they load run their loops on one thread (OpenMP).
config.environment["OMP_NUM_THREADS"] = "1"
