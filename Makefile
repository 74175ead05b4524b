# The two commands of the README, and a few more.
#   make up    install what is missing, build, start the local cluster, run the demo
#   make test  install what is missing, build, run every test (and
#              `make fuzz`: the thread-safety check and each fuzzer for a
#              few seconds)
BUILD_DIR := build/release
ASAN_DIR := build/asan

.PHONY: all setup build build-up tsa fuzz test up bench asan asan-test clean

all: build

setup:
	@scripts/timed setup scripts/setup

build: setup
	@cmake --preset release >/dev/null
	@scripts/timed "build (release)" cmake --build --preset release

# What `trainyard up --demo` needs: the binary and the example programs.
build-up: setup
	@cmake --preset release >/dev/null
	@scripts/timed "build (trainyard and examples)" cmake --build --preset release --target up_programs

# Clang's -Wthread-safety over the module libraries alone (build/tsa, -O0).
# `make test` gets the same check from `make fuzz`, whose Clang build
# compiles every module library with it: one Clang compile of the code, not two.
tsa: setup
	@cmake --preset tsa >/dev/null
	@scripts/timed "build (tsa)" cmake --build --preset tsa

# The libFuzzer programs of fuzz/ (build/fuzz), each run over its corpus for
# FUZZ_SECONDS (scripts/fuzz); a crash, hang or leak fails `make test`. The
# same build compiles every module library with -Wthread-safety -Werror: a
# lock annotation that the code breaks fails it.
FUZZ_SECONDS ?= 10
fuzz: setup
	@cmake --preset fuzz >/dev/null
	@scripts/timed "build (fuzz, thread-safety)" cmake --build --preset fuzz
	@FUZZ_SECONDS=$(FUZZ_SECONDS) scripts/timed fuzz scripts/fuzz

test: build fuzz
	@scripts/timed tests ctest --test-dir $(BUILD_DIR) --output-on-failure -j2

up: build-up
	@$(BUILD_DIR)/trainyard up --demo

bench: build
	@set -e; for b in $(BUILD_DIR)/bench/*_bench; do echo "== $$b"; $$b --benchmark_min_time=0.2; done

asan: setup
	@cmake --preset asan >/dev/null
	@cmake --build --preset asan

asan-test: asan
	@ctest --test-dir $(ASAN_DIR) --output-on-failure -j2

clean:
	rm -rf build
