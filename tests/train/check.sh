#!/usr/bin/env bash
# ctorch train: argument errors, then a few real steps, a checkpoint and a resume when
# Debian's Fashion-MNIST files are installed (exit 77, a ctest skip, otherwise).
set -u
ctorch=$1 work=$2
mkdir -p "$work"
. "$(dirname "$0")/lib.sh" # fail, expect
expect 2 "unknown job 'nope'" train nope
expect 2 "usage: ctorch train" train fashion-mnist --epochs 0
expect 2 "usage: ctorch train" train fashion-mnist --lr
expect 2 "usage: ctorch train" train fashion-mnist --schedule linear-warmup
expect 1 "dataset-fashion-mnist" train fashion-mnist --data "$work/no-such-dir"
data=/usr/share/datasets/fashion-mnist
[ -f "$data/train-labels-idx1-ubyte.gz" ] || { echo "Fashion-MNIST not installed: skipping the run"; exit 77; }
expect 0 "test accuracy" train fashion-mnist --max-steps 4 --eval-limit 200 --quiet --out "$work/cnn" --seed 1
[ -f "$work/cnn.safetensors" ] && [ -f "$work/cnn.pt" ] || fail "no checkpoint written"
expect 0 "resumed from" train fashion-mnist --resume "$work/cnn.pt" --epochs 2 --max-steps 2 --eval-limit 200 \
  --quiet --out "$work/cnn2"
grep -q "resumed from .* after epoch 0" <<<"$out" || fail "a run stopped by --max-steps must resume its epoch: $out"
expect 0 "conv1.weight" inspect "$work/cnn.safetensors"

# The diagnostics of a short run: an allocator snapshot that `ctorch memviz` renders and
# PyTorch's tooling reads (check_snapshot.py; its torch part only where torch imports),
# and a profiler trace that validates as Chrome trace JSON with the model's ops in it.
rm -f "$work/snap.pickle" "$work/trace.json"
expect 0 "memory snapshot: $work/snap.pickle" train fashion-mnist --max-steps 3 --eval-limit 100 --quiet --out "" \
  --memory-snapshot "$work/snap.pickle" --profile "$work/trace.json"
"$ctorch" memviz "$work/snap.pickle" -o "$work/snap.html" >/dev/null || fail "memviz on the training snapshot"
grep -qF '"name":"conv2d"' "$work/snap.html" || fail "the snapshot's trace does not name conv2d"
src=$(cd "$(dirname "$0")/../.." && pwd)
if command -v python3 >/dev/null; then
  python3 "$src/scripts/check_trace.py" -q "$work/trace.json" --expect-span conv2d --expect-span conv2d_backward \
    --expect-span max_pool2d_with_indices --expect-span addmm --min-spans 100 || fail "the training trace is not valid Chrome trace JSON"
  python3 "$src/tests/golden/check_snapshot.py" "$work/snap.pickle"; rc=$?
  [ "$rc" -eq 0 ] || [ "$rc" -eq 77 ] || fail "check_snapshot.py on the training snapshot (exit $rc)"
fi
expect 1 "" train fashion-mnist --max-steps 1 --quiet --out "" --memory-snapshot "$work/no-such-dir/snap.pickle"
echo "train_cli: ok"
