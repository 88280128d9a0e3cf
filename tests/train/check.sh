#!/usr/bin/env bash
# ctorch train: argument errors, then a few real steps, a checkpoint and a resume when
# Debian's Fashion-MNIST files are installed (exit 77, a ctest skip, otherwise).
set -u
ctorch=$1 work=$2
mkdir -p "$work"
fail() { echo "FAIL: $*"; exit 1; }
expect() { # expect RC TEXT ARGS...
  local want=$1 text=$2; shift 2
  out=$("$ctorch" "$@" 2>&1); rc=$?
  [ "$rc" -eq "$want" ] || fail "ctorch $*: exit $rc, expected $want: $out"
  grep -q -- "$text" <<<"$out" || fail "ctorch $*: output lacks '$text': $out"
}
expect 2 "unknown job 'nope'" train nope
expect 2 "usage: ctorch train" train fashion-mnist --epochs 0
expect 2 "usage: ctorch train" train fashion-mnist --lr
expect 1 "dataset-fashion-mnist" train fashion-mnist --data "$work/no-such-dir"
data=/usr/share/datasets/fashion-mnist
[ -f "$data/train-labels-idx1-ubyte.gz" ] || { echo "Fashion-MNIST not installed: skipping the run"; exit 77; }
expect 0 "test accuracy" train fashion-mnist --max-steps 4 --eval-limit 200 --quiet --out "$work/cnn" --seed 1
[ -f "$work/cnn.safetensors" ] && [ -f "$work/cnn.pt" ] || fail "no checkpoint written"
expect 0 "resumed from" train fashion-mnist --resume "$work/cnn.pt" --epochs 2 --max-steps 2 --eval-limit 200 \
  --quiet --out "$work/cnn2"
grep -q "resumed from .* after epoch 0" <<<"$out" || fail "a run stopped by --max-steps must resume its epoch: $out"
expect 0 "conv1.weight" inspect "$work/cnn.safetensors"
echo "train_cli: ok"
