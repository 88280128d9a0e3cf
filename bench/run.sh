#!/usr/bin/env bash
# make bench: runs ctorch's benchmarks and, where PyTorch is installed, PyTorch's side of
# the same workloads in the same run, then prints both with their ratios. ROUNDS=N
# (default 1) alternates the two sides N times and prints medians and the median ratio.
# ONLY="words" keeps the bench/ops figures whose names hold one of the words and skips
# the training benchmarks, so one figure can be re-measured over many short rounds
# (ONLY=matmul ROUNDS=15 make bench). BENCH_OUT=dir keeps each round's two output files
# there (ctorch_R.txt, torch_R.txt) for bench/compare.py to read again later.
# bench/run.sh --contended [build] runs the CPU training steps quiet and beside a busy
# loop instead (bench/contended.sh).
set -euo pipefail
if [ "${1:-}" = "--contended" ]; then # busy-machine mode: bench/contended.sh says what it runs
  shift
  exec "$(dirname "$0")/contended.sh" "$@"
fi
build=${1:-build}
rounds=${ROUNDS:-1}
only=${ONLY:-}
here=$(cd "$(dirname "$0")/.." && pwd)
if [ -n "${BENCH_OUT:-}" ]; then
  out=$BENCH_OUT
  mkdir -p "$out"
else
  out=$(mktemp -d)
  trap 'rm -rf "$out"' EXIT
fi
peer="$here/../shared/bench/torch_peer.py"
py=""
for p in python3 /usr/bin/python3; do
  if "$p" -c "import torch" 2>/dev/null; then py=$p; break; fi
done
[ -f "$peer" ] || py=""
what=ops,cnn,char-cpu
[ -z "$only" ] || what=ops
pairs=()
for r in $(seq 1 "$rounds"); do
  [ "$rounds" = 1 ] || echo "== round $r of $rounds"
  {
    # $only unquoted: each word is one argument (none: every figure)
    # shellcheck disable=SC2086
    "$build/bench/ops" $only
    if [ -z "$only" ]; then
      # the Fashion-MNIST CNN of `ctorch train fashion-mnist` (torch_peer.py's cnn)
      "$build/bench/train_cnn"
      # the character GPT of `ctorch train char-gpt` (torch_peer.py's char-cpu model)
      "$build/bench/train_char_gpt" --threads "$(nproc)"
    fi
  } | tee "$out/ctorch_$r.txt"
  if [ -n "$py" ]; then
    {
      # torch_peer_compat.py supplies F.scaled_dot_product_attention on PyTorch < 2.0
      "$py" "$here/bench/torch_peer_compat.py" "$peer" --device cpu --what "$what" --threads "$(nproc)"
      # the lines torch_peer.py does not print (copy, mul, exp, softmax)
      "$py" "$here/bench/torch_ops.py" --threads "$(nproc)"
    } | tee "$out/torch_$r.txt"
    pairs+=("$out/ctorch_$r.txt" "$out/torch_$r.txt")
  fi
done
if [ -n "$py" ]; then
  echo
  python3 "$here/bench/compare.py" "${pairs[@]}"
else
  echo "(PyTorch or shared/bench/torch_peer.py not found: no side-by-side figures)"
fi
