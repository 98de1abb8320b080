# Two entry points on a fresh Debian 12 machine: `make demo` and `make test`.
# Everything else is plain CMake + Ninja in build/.

BUILD_DIR ?= build
CMAKE_FLAGS ?=
JOBS ?= $(shell nproc)

# The compilers are the ones scripts/setup.sh installs. They are looked up by the configure
# recipe, which runs after setup, never when make reads this file: on a fresh machine
# clang-22 does not exist yet at that point, and an older clang or gcc of the image must not
# take its place.
LLVM_VERSION := 22
CLANGXX := clang++-$(LLVM_VERSION)
CLANG := clang-$(LLVM_VERSION)

.PHONY: all setup configure build test demo fuzz clean

all: build

setup:
	@bash scripts/setup.sh

# `| setup`: setup runs first (it installs the compilers) without making build.ninja stale.
$(BUILD_DIR)/build.ninja: | setup
	@cxx="$$(command -v $(CLANGXX))" && cc="$$(command -v $(CLANG))" || { \
	  echo "make: $(CLANGXX) or $(CLANG) not found; scripts/setup.sh installs them" >&2; exit 1; }; \
	set -x; cmake -S . -B $(BUILD_DIR) -G Ninja \
	  -DCMAKE_CXX_COMPILER="$$cxx" -DCMAKE_C_COMPILER="$$cc" -DLLVM_USE_LINKER=lld $(CMAKE_FLAGS)

# A build directory configured earlier with another compiler (say the image's clang 14, by
# an older Makefile) is refused rather than used: CMake never changes the compiler of an
# existing build directory.
configure: $(BUILD_DIR)/build.ninja
	@cxx="$$(sed -n 's/^CMAKE_CXX_COMPILER:[A-Z]*=//p' $(BUILD_DIR)/CMakeCache.txt)"; \
	case "$$cxx" in *$(CLANGXX)) ;; *) \
	  echo "make: $(BUILD_DIR)/ was configured with '$$cxx', not $(CLANGXX): run 'make clean'" >&2; \
	  exit 1;; esac

build: configure
	cmake --build $(BUILD_DIR) -j $(JOBS)

# Every suite: lit (dialects, passes, frontend, tools) and GoogleTest, through one lit run.
test: build
	cmake --build $(BUILD_DIR) --target check-mtc

demo: build
	@bash scripts/demo.sh $(BUILD_DIR)

# The libFuzzer targets (the .mtl parser, the whole frontend, the plan loader, the checkpoint
# reader); see docs/fuzzing.md.
FUZZERS := mtl-parser-fuzzer mtl-frontend-fuzzer plan-loader-fuzzer checkpoint-fuzzer
fuzz: setup
	cmake -S . -B $(BUILD_DIR)-fuzz -G Ninja -DCMAKE_CXX_COMPILER=$(CLANGXX) -DCMAKE_C_COMPILER=$(CLANG) \
	  -DLLVM_USE_LINKER=lld -DMTC_BUILD_FUZZERS=ON
	cmake --build $(BUILD_DIR)-fuzz -j $(JOBS) $(addprefix --target ,$(FUZZERS))

clean:
	rm -rf $(BUILD_DIR)
