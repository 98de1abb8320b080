# Two entry points on a fresh Debian 12 machine: `make demo` and `make test`.
# Everything else is plain CMake + Ninja in build/.

BUILD_DIR ?= build
CMAKE_FLAGS ?=
JOBS ?= $(shell nproc)

CXX_COMPILER := $(shell command -v clang++-22 || command -v clang++ || command -v g++)
C_COMPILER := $(shell command -v clang-22 || command -v clang || command -v gcc)

.PHONY: all setup configure build test test-lit test-unit demo fuzz clean

all: build

setup:
	@bash scripts/setup.sh

$(BUILD_DIR)/build.ninja:
	cmake -S . -B $(BUILD_DIR) -G Ninja \
	  -DCMAKE_CXX_COMPILER=$(CXX_COMPILER) -DCMAKE_C_COMPILER=$(C_COMPILER) \
	  -DLLVM_USE_LINKER=lld $(CMAKE_FLAGS)

configure: setup $(BUILD_DIR)/build.ninja

build: configure
	cmake --build $(BUILD_DIR) -j $(JOBS)

# Every suite: lit (dialects, passes, frontend, tools) and GoogleTest, through one lit run.
test: build
	cmake --build $(BUILD_DIR) --target check-mtc

demo: build
	@bash scripts/demo.sh $(BUILD_DIR)

# libFuzzer target for the .mtl parser; see docs/fuzzing.md.
fuzz: setup
	cmake -S . -B $(BUILD_DIR)-fuzz -G Ninja -DCMAKE_CXX_COMPILER=clang++-22 -DCMAKE_C_COMPILER=clang-22 \
	  -DLLVM_USE_LINKER=lld -DMTC_BUILD_FUZZERS=ON
	cmake --build $(BUILD_DIR)-fuzz --target mtl-parser-fuzzer -j $(JOBS)

clean:
	rm -rf $(BUILD_DIR)
