#!/usr/bin/env bash
# The thread pool (src/core/parallel.c) and the code that runs on it under
# ThreadSanitizer: builds build-tsan/ (CT_TSAN=ON, no CUDA, no benchmarks) and runs the
# tests that drive the pool's threads: its own (test_threads, test_thread_state), the
# fused recurrences' loops (test_nn_rnn), reductions, convolutions, the nn functions and
# the transformer layers (attention, layer norm). test_compile is left out: the code it
# generates runs on libgomp's threads, whose synchronisation TSan does not see (every
# write of a generated loop then reads as a race).
#
#   scripts/tsan.sh [TEST...]      default: the list below
#
# The pool runs CT_TSAN_THREADS threads (default 4, through OMP_NUM_THREADS, which sets
# ctorch's default count; a region uses no more threads than the process has CPUs, Note
# [No more threads than cores]) and prints its statistics at exit (CT_POOL_STATS), so a
# log shows that regions ran. OpenBLAS and oneDNN are not instrumented: their own accesses
# are not checked, and OpenBLAS runs on the calling thread (OPENBLAS_NUM_THREADS=1).
# Exits non-zero when a test fails or TSan reports.
set -euo pipefail
cd "$(dirname "$0")/.."
tests=("$@")
if [ ${#tests[@]} -eq 0 ]; then
  tests=(test_threads test_thread_state test_nn_rnn test_ops_reduce test_conv_fast test_nn_functional
         test_nn_transformer)
fi
mkdir -p build-tsan
log=build-tsan/build.log
cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCT_TSAN=ON -DCT_CUDA=OFF -DCT_BUILD_BENCH=OFF \
  -DCT_BUILD_EXAMPLES=OFF >$log 2>&1 || { cat $log; exit 1; }
cmake --build build-tsan -j "${JOBS:-2}" --target "${tests[@]}" >>$log 2>&1 || { tail -40 $log; exit 1; }
export OMP_NUM_THREADS="${CT_TSAN_THREADS:-4}" OPENBLAS_NUM_THREADS=1 CT_POOL_STATS=1 CMOCKA_MESSAGE_OUTPUT=stdout
export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 ${TSAN_OPTIONS:-}"
failed=0
for t in "${tests[@]}"; do
  if (cd build-tsan/tests && "./$t" >"../$t.tsan.log" 2>&1); then
    echo "tsan: $t ok ($(grep -o 'thread pool: [0-9]* regions' "build-tsan/$t.tsan.log" || echo 'no pool regions'))"
  else
    echo "tsan: $t FAILED; log: build-tsan/$t.tsan.log"
    grep -E "WARNING: ThreadSanitizer|SUMMARY" -A12 "build-tsan/$t.tsan.log" | head -40 || true
    failed=1
  fi
done
exit $failed
