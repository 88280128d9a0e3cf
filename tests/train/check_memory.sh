#!/usr/bin/env bash
# Flat memory over a run (docs/memory.md, "Long runs"): `ctorch train fashion-mnist`
# (random images, --synthetic) and `ctorch train char-gpt` (a tiny model on the docs'
# text) print the CPU allocator's peak and the RSS at steps 10, 100 and 1000
# (--memory-report); the peak after step 1000 must be within 1% of the peak after step
# 100, and the RSS within 10% (glibc's and the kernel's share of it move a little).
# Both runs also go under CT_DEBUG=refs for a few steps: no ownership mistake, nothing
# left alive at exit.
set -u
ctorch=$1 work=$2 src=$3
mkdir -p "$work"
. "$(dirname "$0")/lib.sh" # fail, expect
cat "$src"/docs/*.md >"$work/text.txt"

# check_flat NAME: reads $out's "memory at step" lines
check_flat() {
  local p100 p1000 r100 r1000
  p100=$(sed -n 's/^memory at step 100: peak allocated \([0-9]*\) bytes.*/\1/p' <<<"$out")
  p1000=$(sed -n 's/^memory at step 1000: peak allocated \([0-9]*\) bytes.*/\1/p' <<<"$out")
  r100=$(sed -n 's/^memory at step 100: .*RSS \([0-9]*\) kB/\1/p' <<<"$out")
  r1000=$(sed -n 's/^memory at step 1000: .*RSS \([0-9]*\) kB/\1/p' <<<"$out")
  [ -n "$p100" ] && [ -n "$p1000" ] && [ -n "$r100" ] && [ -n "$r1000" ] || fail "$1: no memory report: $out"
  [ $((p1000 * 100)) -le $((p100 * 101)) ] || fail "$1: allocator peak grew from $p100 to $p1000 bytes"
  [ $((r1000 * 10)) -le $((r100 * 11)) ] || fail "$1: RSS grew from $r100 to $r1000 kB"
  echo "$1: peak $p100 -> $p1000 bytes, RSS $r100 -> $r1000 kB"
}

cnn=(train fashion-mnist --synthetic 4096 --batch-size 4 --epochs 1 --eval-limit 16 --out "" --quiet --threads 1)
expect 0 "memory at step 1000" "${cnn[@]}" --max-steps 1000 --memory-report
check_flat fashion-mnist
gpt=(train char-gpt --text "$work/text.txt" --batch-size 2 --block-size 16 --layers 1 --heads 2 --embd 16
     --eval-interval 100000 --eval-iters 1 --sample-tokens 0 --out "" --quiet --threads 1)
expect 0 "memory at step 1000" "${gpt[@]}" --steps 1000 --memory-report
check_flat char-gpt

for job in cnn gpt; do
  if [ $job = cnn ]; then args=("${cnn[@]}" --max-steps 20); else args=("${gpt[@]}" --steps 20); fi
  out=$(CT_DEBUG=refs "$ctorch" "${args[@]}" 2>&1) || fail "CT_DEBUG=refs ${args[*]}: $out"
  ! grep -q "CT_DEBUG=refs" <<<"$out" || fail "CT_DEBUG=refs ${args[*]}: $out"
done
echo "train_memory: ok"
