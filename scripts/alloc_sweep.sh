#!/usr/bin/env bash
# The full allocation-failure sweep: builds tests/alloc_sweep in the sanitizer tree
# (build-asan, configured as `make asan` does) and runs it over every N, so that each
# host allocation of `ctorch train fashion-mnist --max-steps 3` (a small synthetic data
# set) and of loading a .pt and a .safetensors checkpoint fails once, in a child of its
# own. Each job ends with a line of counts (absorbed, clean errors, aborts, hangs,
# leaks, bad exits); the exit status is 1 when any child aborted, hung, leaked or exited
# wrongly. ctest runs the same program with a stride (alloc_sweep_cli).
#
#   scripts/alloc_sweep.sh [alloc_sweep options] [JOB...]
#
#   e.g. scripts/alloc_sweep.sh --stride 5 train; scripts/alloc_sweep.sh --from 800 --to 820 --trace train
#
# JOB is train, load-pt or load-safetensors (default: all three). The whole sweep takes
# about 30 minutes on one core under the sanitizers (the train job most of it).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD_DIR:-build-asan}
mkdir -p "$build"
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Debug -DCT_SANITIZE=ON -DCT_BUILD_BENCH=OFF -DCT_CUDA=OFF \
  ${CMAKE_FLAGS:-} >"$build/configure.log" || { cat "$build/configure.log"; exit 1; }
cmake --build "$build" -j "${JOBS:-2}" --target alloc_sweep >/dev/null
args=("$@")
jobs=0
for a in "${args[@]}"; do
  case "$a" in train|load-pt|load-safetensors) jobs=1 ;; esac
done
[ $jobs -eq 1 ] || args+=(train load-pt load-safetensors)
export ASAN_OPTIONS="detect_leaks=1:allocator_may_return_null=1:${ASAN_OPTIONS:-}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
exec "$build/tests/alloc_sweep" "${args[@]}"
