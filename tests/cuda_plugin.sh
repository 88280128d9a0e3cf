#!/usr/bin/env bash
# The CUDA backend is a plug-in (Note [CUDA as a plug-in] in CMakeLists.txt):
#   1. libctorch.so needs no CUDA library (readelf's NEEDED entries);
#   2. a CPU program runs, and says why CUDA is missing, when the CUDA libraries the
#      backend needs cannot be loaded (broken stand-ins first on LD_LIBRARY_PATH, which
#      the loader searches before any RUNPATH), and when the backend file is missing.
#
#   tests/cuda_plugin.sh LIBDIR CPU_ONLY_PROGRAM
set -u
libdir=$1 prog=$2
lib=$libdir/libctorch.so
cuda=$libdir/libctorch_cuda.so
[ -f "$lib" ] || { echo "FAIL: no $lib"; exit 1; }
if [ ! -f "$cuda" ]; then
  echo "SKIP: this build has no CUDA backend"
  exit 77
fi
command -v readelf >/dev/null || { echo "SKIP: readelf not found"; exit 77; }
needed() { readelf -d "$1" | sed -n 's/.*(NEEDED).*\[\(.*\)\].*/\1/p'; }
bad=$(needed "$lib" | grep -Ei 'cuda|cublas|cudnn|nccl|nvrtc')
if [ -n "$bad" ]; then
  echo "FAIL: libctorch.so needs CUDA libraries: $bad"
  exit 1
fi
echo "libctorch.so needs: $(needed "$lib" | tr '\n' ' ')"
fake=$(mktemp -d)
trap 'rm -rf "$fake"' EXIT
n=0
for so in $(needed "$cuda" | grep -Ei 'cuda|cublas'); do
  echo "not a library" >"$fake/$so"
  n=$((n + 1))
done
[ $n -gt 0 ] || { echo "FAIL: libctorch_cuda.so needs no CUDA library?"; exit 1; }
echo "== CUDA libraries unreachable ($n broken stand-ins)"
out=$(LD_LIBRARY_PATH="$fake${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$prog" 2>&1) || { echo "$out"; echo "FAIL: the CPU program failed"; exit 1; }
echo "$out"
echo "$out" | grep -q "cuda: not loaded: .*\(cuda\|cublas\)" || { echo "FAIL: the reason does not name the missing library"; exit 1; }
echo "== backend file missing"
out=$(CT_CUDA_BACKEND="$fake/libctorch_cuda.so.0" "$prog" 2>&1) || { echo "$out"; echo "FAIL: the CPU program failed"; exit 1; }
echo "$out" | grep -q "cuda: not loaded: .*libctorch_cuda" || { echo "$out"; echo "FAIL: no reason naming the backend"; exit 1; }
echo "cuda_plugin: ok"
