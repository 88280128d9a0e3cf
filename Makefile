# The front door: `make run` and `make test` work on a fresh Debian machine.
BUILD    ?= build
TYPE     ?= Release
JOBS     ?= $(shell nproc 2>/dev/null || echo 2)
PREFIX   ?= /usr/local
CMAKE_FLAGS ?=

.PHONY: all deps build run test bench install clean asan

all: build

deps:
	@scripts/deps.sh

build: deps
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=$(TYPE) -DCMAKE_INSTALL_PREFIX=$(PREFIX) $(CMAKE_FLAGS) >/dev/null
	@cmake --build $(BUILD) -j $(JOBS)

# The main job.
run: deps
	@scripts/deps.sh --run
	@$(MAKE) --no-print-directory build
	@$(BUILD)/ctorch

test: build
	@cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

bench: build
	@$(BUILD)/bench/ops

install: build
	@cmake --install $(BUILD)

# The test suite under AddressSanitizer + UndefinedBehaviorSanitizer (LeakSanitizer on).
asan:
	@$(MAKE) --no-print-directory test BUILD=build-asan TYPE=Debug CMAKE_FLAGS="-DCT_SANITIZE=ON -DCT_BUILD_BENCH=OFF $(CMAKE_FLAGS)"

clean:
	rm -rf build build-asan
