#!/bin/sh
# The GPU check in one call: configure a CUDA build (Release, CT_CUDA=ON), build it,
# run the whole test suite (GPU tests included), compute-sanitizer memcheck over the
# CUDA test programs, and the GPU benchmark beside PyTorch's figures from the same run.
#
#   scripts/gpu-check.sh [all|build|test|memcheck|bench]...   (default: all)
#
# Under a 10-minute limit per command, run it in two calls:
#   scripts/gpu-check.sh build test && scripts/gpu-check.sh memcheck bench
#
# Everything it produces goes under $OUT when that is set:
# configure.log build.log ctest.log memcheck_<test>.log bench_ctorch.txt bench_torch.txt
# summary.txt (else $BUILD_DIR/gpu-check-out). The build directory is $BUILD_DIR (default
# build-gpu), kept between runs.
# Exit status: non-zero when a stage failed (every stage still runs).
#
# The GPU machine has no -dev packages and no network: carry the libraries as .deb
# files (`scripts/deps.sh --download .debs` here, then carry .debs). When .debs/
# holds any, they are unpacked under /opt/ctorch-deps (DEPS_PREFIX) and CMake, the
# compiler and the loader are pointed there.
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD_DIR:-build-gpu}
OUTDIR=${OUT:-$PWD/$BUILD/gpu-check-out}
JOBS=${JOBS:-16}
mkdir -p "$OUTDIR"
SUMMARY="$OUTDIR/summary.txt"
status=0

say() { echo "$*" | tee -a "$SUMMARY"; }
stage_result() { # name rc
    if [ "$2" -eq 0 ]; then say "$1: ok"; else say "$1: FAILED (exit $2)"; status=1; fi
}

stages=${*:-all}
want() { case " $stages " in *" all "*|*" $1 "*) return 0 ;; *) return 1 ;; esac; }
say "== gpu-check $(date -u +%Y-%m-%dT%H:%M:%SZ): $stages"

DEBS=${DEBS_DIR:-.debs}
if ls "$DEBS"/*.deb > /dev/null 2>&1; then
    PREFIX=${DEPS_PREFIX:-/opt/ctorch-deps}
    mkdir -p "$PREFIX"
    for f in "$DEBS"/*.deb; do dpkg -x "$f" "$PREFIX"; done
    ARCH=$(gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)
    export CMAKE_PREFIX_PATH="$PREFIX/usr${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}"
    export CMAKE_LIBRARY_PATH="$PREFIX/usr/lib/$ARCH${CMAKE_LIBRARY_PATH:+:$CMAKE_LIBRARY_PATH}"
    export CMAKE_INCLUDE_PATH="$PREFIX/usr/include${CMAKE_INCLUDE_PATH:+:$CMAKE_INCLUDE_PATH}"
    export LD_LIBRARY_PATH="$PREFIX/usr/lib/$ARCH:$PREFIX/usr/lib/$ARCH/openblas-openmp${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    say "deps: $(ls "$DEBS"/*.deb | wc -l) packages unpacked under $PREFIX"
fi

# cuDNN is loaded at run time (Note [cuDNN at run time] in src/cuda/rnn_cudnn.c); the
# machine has it in PyTorch's wheel only, so point the backend there unless told.
if [ -z "${CT_CUDNN_LIBRARY:-}" ]; then
    dnn=$(python3 -c "import glob, os, nvidia.cudnn as m; print((glob.glob(os.path.join(list(m.__path__)[0], 'lib', 'libcudnn.so.*')) or [''])[0])" 2>/dev/null || true)
    if [ -n "$dnn" ]; then
        export CT_CUDNN_LIBRARY="$dnn" LD_LIBRARY_PATH="$(dirname "$dnn")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
        say "cudnn: $dnn"
    fi
fi

if command -v nvidia-smi > /dev/null 2>&1; then
    nvidia-smi > "$OUTDIR/nvidia-smi.txt" 2>&1
fi

if want build; then
    cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DCT_CUDA=ON -DCT_WERROR=ON > "$OUTDIR/configure.log" 2>&1
    rc=$?
    if [ $rc -eq 0 ]; then
        cmake --build "$BUILD" -j"$JOBS" -- -k > "$OUTDIR/build.log" 2>&1 # -k: every error in one run
        rc=$?
    fi
    stage_result build $rc
fi

if want test; then
    # which backends the shared library loads here (the CUDA plug-in, or why not)
    "$BUILD/ctorch" info > "$OUTDIR/info.txt" 2>&1
    grep -E "^  (cpu|cuda):" "$OUTDIR/info.txt" | tee -a "$SUMMARY"
    (cd "$BUILD" && ctest --output-on-failure -j4 --timeout 300) > "$OUTDIR/ctest.log" 2>&1
    rc=$?
    stage_result ctest $rc
    grep -E "tests passed|tests failed|Skipped|\*\*\*Failed|Not Run" "$OUTDIR/ctest.log" | tee -a "$SUMMARY"
fi

SAN=$(command -v compute-sanitizer || true)
[ -z "$SAN" ] && [ -x /usr/local/cuda/bin/compute-sanitizer ] && SAN=/usr/local/cuda/bin/compute-sanitizer
# The CUDA test programs of this build (test_cuda_api, test_cuda, test_cuda_<family>...).
cuda_tests() { for t in "$BUILD"/tests/test_cuda*; do [ -x "$t" ] && basename "$t"; done; }

# sanitize TOOL: every CUDA test program under compute-sanitizer --tool TOOL. API errors
# are part of what the tests check (bad device ordinals, OOM), so only the tool's own
# findings count.
sanitize() {
    if [ -z "$SAN" ]; then
        say "$1: skipped (compute-sanitizer not found)"
        return
    fi
    for t in $(cuda_tests); do
        CT_CUDA_TEST_SMALL=1 timeout 300 "$SAN" --tool "$1" --report-api-errors no --error-exitcode 99 \
            "$BUILD/tests/$t" > "$OUTDIR/$1_$t.log" 2>&1
        rc=$?
        stage_result "$1 $t" $rc
        grep -E "ERROR SUMMARY|RACECHECK SUMMARY" "$OUTDIR/$1_$t.log" | tee -a "$SUMMARY"
    done
}

if want memcheck; then sanitize memcheck; fi
if want racecheck; then sanitize racecheck; fi

if want bench; then
    "$BUILD/bench/cuda_ops" > "$OUTDIR/bench_ctorch.txt" 2>&1
    stage_result "bench ctorch" $?
    if python3 -c "import torch" > /dev/null 2>&1; then
        python3 bench/torch_cuda_peer.py > "$OUTDIR/bench_torch.txt" 2>&1
        stage_result "bench torch" $?
    else
        say "bench torch: skipped (no python3 with torch)"
        : > "$OUTDIR/bench_torch.txt"
    fi
    # One table: ctorch, PyTorch, ratio (ctorch / PyTorch; for "us" lower is better).
    say ""
    say "name ctorch torch ratio unit"
    awk '
        FNR == NR { if ($1 !~ /^#/ && NF >= 3) { sub(/^torch_/, "", $1); t[$1] = $2 } ; next }
        $1 !~ /^#/ && NF >= 3 {
            r = ($1 in t && t[$1] + 0 != 0) ? sprintf("%.3f", $2 / t[$1]) : "-"
            printf "%s %s %s %s %s\n", $1, $2, ($1 in t ? t[$1] : "-"), r, $3
        }
    ' "$OUTDIR/bench_torch.txt" "$OUTDIR/bench_ctorch.txt" | tee -a "$SUMMARY"
fi

exit $status
