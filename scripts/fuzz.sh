#!/usr/bin/env bash
# Builds every fuzz/fuzz_*.c with clang -fsanitize=fuzzer,address,undefined against the
# library sources (build dir build-fuzz/) and runs each on its corpus fuzz/corpus/<name>/
# (<name> is the file name without "fuzz_"), with fuzz/<name>.dict when present.
#
#   scripts/fuzz.sh [--ci] [--time SECONDS] [--runs N] [--seed N] [--build-only] [TARGET...]
#
#   --ci          the CI mode: every target for 35 s (or --time / --runs); new inputs go
#                 to a temporary directory; exit 1 if any target crashes, leaks or hits UB
#   --time S      seconds per target (default 60, 35 with --ci)
#   --runs N      stop each target after N inputs instead of after a time
#   --seed N      libFuzzer's random seed (default: a new one each run, printed in the log)
#   --build-only  build the targets and stop
#   TARGET        fuzz_safetensors, fuzz_pt, fuzz_ops, ... (default: all)
#
# Outside --ci, new interesting inputs are kept in build-fuzz/corpus/<name>/ between runs
# (copy the small ones worth keeping into fuzz/corpus/<name>/). Crash reproducers are
# written to build-fuzz/artifacts/; replay one with build-fuzz/fuzz_<name> FILE.
# Without clang or its libFuzzer runtime (Debian: clang, libclang-rt-14-dev) this prints
# a skip line and exits 0.
set -euo pipefail
cd "$(dirname "$0")/.."

ci=0 time="" runs="" seed="" build_only=0
targets=()
while [ $# -gt 0 ]; do
  case "$1" in
    --ci) ci=1 ;;
    --time) time="$2"; shift ;;
    --runs) runs="$2"; shift ;;
    --seed) seed="$2"; shift ;;
    --build-only) build_only=1 ;;
    -h|--help) sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    fuzz_*) targets+=("$1") ;;
    *) echo "fuzz.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
  shift
done

if [ -z "$time" ]; then
  if [ $ci -eq 1 ]; then time=35; else time=60; fi
fi

cc="${CT_FUZZ_CC:-clang}"
if ! command -v "$cc" >/dev/null 2>&1; then
  echo "fuzz: SKIP: $cc not found (install clang and libclang-rt-14-dev to fuzz the loaders)"
  exit 0
fi
probe_dir=$(mktemp -d)
trap 'rm -rf "$probe_dir"' EXIT
printf 'int LLVMFuzzerTestOneInput(const unsigned char *d, unsigned long n);\nint LLVMFuzzerTestOneInput(const unsigned char *d, unsigned long n) { (void)d; (void)n; return 0; }\n' \
  > "$probe_dir/probe.c"
if ! "$cc" -fsanitize=fuzzer,address,undefined "$probe_dir/probe.c" -o "$probe_dir/probe" >/dev/null 2>&1; then
  echo "fuzz: SKIP: $cc cannot link libFuzzer with ASan/UBSan (Debian: libclang-rt-14-dev)"
  exit 0
fi

if [ ${#targets[@]} -eq 0 ]; then
  for f in fuzz/fuzz_*.c; do targets+=("$(basename "$f" .c)"); done
fi
echo "== fuzz: building ${targets[*]} with $cc"
cmake -S fuzz -B build-fuzz -DCMAKE_C_COMPILER="$cc" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build-fuzz -j 2 --target "${targets[@]}" >/dev/null
[ $build_only -eq 1 ] && exit 0

mkdir -p build-fuzz/artifacts
failed=()
for t in "${targets[@]}"; do
  name="${t#fuzz_}"
  seeds="fuzz/corpus/$name"
  mkdir -p "$seeds"
  if [ $ci -eq 1 ]; then
    work="$probe_dir/corpus-$name"
  else
    work="build-fuzz/corpus/$name"
  fi
  mkdir -p "$work"
  args=(-timeout=10 -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="build-fuzz/artifacts/$t-")
  if [ -n "$runs" ]; then args+=(-runs="$runs"); else args+=(-max_total_time="$time"); fi
  [ -f "fuzz/$name.dict" ] && args+=(-dict="fuzz/$name.dict")
  [ -n "$seed" ] && args+=(-seed="$seed")
  log="build-fuzz/$t.log"
  if [ -n "$runs" ]; then budget="$runs runs"; else budget="$time s"; fi
  echo "== fuzz: $t ($budget) on $seeds"
  set +e
  ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1}" UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}" \
    "build-fuzz/$t" "${args[@]}" "$work" "$seeds" >"$log" 2>&1
  rc=$?
  set -e
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 || true)
  if [ $rc -ne 0 ]; then
    echo "fuzz: $t FAILED (exit $rc) after ${execs:-?} executions; log: $log"
    grep -E "ERROR: |SUMMARY: |runtime error|Test unit written" "$log" | head -20 || true
    failed+=("$t")
  else
    calls=$(sed -n 's/^fuzz_[a-z]*: \([0-9]*\) calls$/, \1 calls/p' "$log" | tail -1)
    echo "fuzz: $t ok: ${execs:-?} executions${calls}, ${cov:-cov: ?}"
  fi
done

if [ ${#failed[@]} -ne 0 ]; then
  echo "fuzz: FAILED: ${failed[*]}"
  exit 1
fi
echo "fuzz: all targets passed"
