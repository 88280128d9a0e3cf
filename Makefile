# The front door: `make run` and `make test` work on a fresh Debian machine.
#   make run      install what is missing (apt), build, run the main job (ctorch)
#   make test     build and run the test suite (ctest)
#   make asan     the same suite under ASan + UBSan + LSan, in build-asan/
#   make install  PREFIX=/usr/local: headers, libraries, ctorch, ctorch.pc, CMake package
BUILD    ?= build
TYPE     ?= Release
JOBS     ?= $(shell nproc 2>/dev/null || echo 2)
PREFIX   ?= /usr/local
# extra options for the main job, e.g. make run RUN_ARGS="--epochs 1"
RUN_ARGS ?=
CMAKE_FLAGS ?=
# Sub-makes (the build itself) would announce every directory they enter.
MAKEFLAGS += --no-print-directory

.PHONY: all deps build run test bench install clean asan

all: build

deps:
	@scripts/deps.sh

# Configure quietly (the log is shown only when configuring fails), then build.
define configure_and_build
	@mkdir -p $(BUILD)
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=$(TYPE) $(CMAKE_FLAGS) >$(BUILD)/configure.log || \
	  { cat $(BUILD)/configure.log; echo "make: configuring $(BUILD) failed (log above)" >&2; exit 1; }
	@cmake --build $(BUILD) -j $(JOBS)
endef

build: deps
	$(configure_and_build)

# The main job.
run:
	@scripts/deps.sh --run
	$(configure_and_build)
	@$(BUILD)/ctorch train fashion-mnist $(RUN_ARGS)

test: build
	@cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

bench: build
	@bench/run.sh $(BUILD)

install: build
	@cmake --install $(BUILD) --prefix $(PREFIX)

# The test suite under AddressSanitizer + UndefinedBehaviorSanitizer (LeakSanitizer on),
# without CUDA and benchmarks. The tests provoke failing huge allocations on purpose,
# hence allocator_may_return_null; options already in ASAN_OPTIONS take precedence.
asan:
	@ASAN_OPTIONS="detect_leaks=1:allocator_may_return_null=1:$${ASAN_OPTIONS:-}" \
	  $(MAKE) --no-print-directory test BUILD=build-asan TYPE=Debug \
	  CMAKE_FLAGS="-DCT_SANITIZE=ON -DCT_BUILD_BENCH=OFF -DCT_CUDA=OFF $(CMAKE_FLAGS)"

clean:
	rm -rf build build-asan
