#!/usr/bin/env bash
# ctorch train gpt2: argument and input errors, then short runs on generated data: a file
# read as bytes (the loss must drop, a resumed run must give the same weights), and an
# llm.c token shard with a validation shard and a tokenizer file (the sample must decode
# through it). Tiny models and one thread, as check_gpt.sh.
set -u
ctorch=$1 work=$2
mkdir -p "$work"
. "$(dirname "$0")/lib.sh" # fail, expect
# bytes: a repetitive text, so a tiny model learns it in a few dozen steps
for i in $(seq 1 300); do printf 'the cat sat on the mat. '; done >"$work/text.txt"
# an llm.c shard (magic 20240520, version 1, N, then uint16 ids), ids cycling over 0..7
shard() { # shard FILE N VERSION [BAD_ID]
  perl -e 'my ($n, $v, $bad) = @ARGV; print pack("l<256", 20240520, $v, $n, (0) x 253);
           print pack("S<*", map { $_ == 5 && defined $bad ? $bad : $_ % 8 } 0 .. $n - 1)' "$2" "$3" ${4:-} >"$1"
}
shard "$work/train.bin" 4000 1
shard "$work/val.bin" 1000 1
shard "$work/v2.bin" 1000 2
shard "$work/badid.bin" 1000 1 60000
# llm.c's tokenizer file: magic 20240328, version 2, 50257 tokens, eot 50256; token i is "<i>"
perl -e 'print pack("l<256", 20240328, 2, 50257, 50256, (0) x 252);
         for my $i (0 .. 50256) { my $s = "<$i>"; print pack("C", length $s), $s }' >"$work/tok.bin"

expect 0 "llm.c's token shard format" train gpt2 --help
expect 0 "gpt2" train --help
expect 2 "give either --train FILE" train gpt2
expect 2 "give either --train FILE" train gpt2 --train "$work/text.txt" --synthetic
expect 2 "--val needs --train" train gpt2 --synthetic --val "$work/val.bin"
expect 2 "unknown preset 'xl'" train gpt2 --synthetic --preset xl
expect 2 "invalid value 'fp8' for --dtype" train gpt2 --synthetic --dtype fp8
expect 2 "unknown device 'gpu'" train gpt2 --synthetic --device gpu
expect 2 "--dtype fp16 needs --device cuda" train gpt2 --synthetic --dtype fp16
expect 2 "unknown option '--text'" train gpt2 --text "$work/text.txt"
expect 2 "unknown --lr-schedule 'step' (constant or cosine)" train gpt2 --synthetic --lr-schedule step
expect 2 "--min-lr (1) must not exceed --lr (0.001)" train gpt2 --synthetic --preset tiny --lr-schedule cosine \
  --min-lr 1
expect 1 "token shard version 2 is not supported" train gpt2 --train "$work/v2.bin"
expect 1 "token 60000 at position 5 is outside GPT-2's vocabulary" train gpt2 --train "$work/badid.bin"
expect 1 "cannot open" train gpt2 --train "$work/missing.bin"
expect 1 "too short" train gpt2 --train "$work/val.bin" --preset tiny --block-size 200
expect 2 "text prompts need byte tokens" train gpt2 --train "$work/train.bin" --preset tiny --prompt hi
expect 1 "is not a tokenizer file" train gpt2 --train "$work/train.bin" --tokenizer "$work/text.txt"

tiny=(--preset tiny --layers 1 --heads 2 --embd 32 --block-size 16 --batch-size 8 --threads 1 --quiet)
expect 0 "bytes), vocabulary 256 (model 256)" train gpt2 --train "$work/text.txt" "${tiny[@]}" --steps 60 \
  --lr 3e-3 --eval-iters 2 --sample-tokens 40 --sample-out "$work/sample.txt" --out "$work/bytes.safetensors"
grep -q "step 60: train loss .*, val loss" <<<"$out" || fail "no validation loss at step 60: $out"
read -r first last < <(sed -n 's/^first loss \([0-9.]*\), final train loss \([0-9.]*\)$/\1 \2/p' <<<"$out")
[ -n "${first:-}" ] && [ -n "${last:-}" ] || fail "no loss summary: $out"
awk -v f="$first" -v l="$last" 'BEGIN { exit !(l < 0.6 * f) }' || fail "loss did not drop: $first -> $last"
[ "$(wc -c <"$work/sample.txt")" -eq 40 ] || fail "the sample has $(wc -c <"$work/sample.txt") bytes, not 40"
expect 0 "ctorch gpt2" inspect "$work/bytes.safetensors"

# a shard with a validation shard: the model's vocabulary is GPT-2's padded to 50304,
# the sample starts from end-of-text and decodes through the tokenizer
expect 0 "GPT-2 token shard), vocabulary 50257 (model 50304), 4000 train / 1000 val tokens" \
  train gpt2 --train "$work/train.bin" --val "$work/val.bin" --tokenizer "$work/tok.bin" "${tiny[@]}" \
  --steps 4 --eval-iters 1 --sample-tokens 6 --sample-out "$work/tokens.txt" --out ""
grep -Eq '^(<[0-9]+>){6}$' "$work/tokens.txt" || fail "the sample did not decode through the tokenizer: $(cat "$work/tokens.txt")"
expect 0 "sample (3 tokens" train gpt2 --train "$work/train.bin" "${tiny[@]}" --steps 2 --eval-iters 1 \
  --sample-tokens 3 --out ""
grep -Eq '^[0-9]+ [0-9]+ [0-9]+$' <<<"$(tail -1 <<<"$out")" || fail "without a tokenizer the sample prints ids: $out"

# the training state: 4 steps then --resume to 8 gives the weights of 8 steps in one go
small=(--train "$work/text.txt" "${tiny[@]}" --eval-iters 1 --eval-interval 100 --sample-tokens 0 --seed 5)
expect 0 "saved $work/full.safetensors and $work/full.pt" train gpt2 "${small[@]}" --steps 8 \
  --out "$work/full.safetensors"
expect 0 "(training state)" train gpt2 "${small[@]}" --steps 4 --out "$work/half.safetensors"
expect 0 "resumed from $work/half.pt after step 4 (seed 5)" train gpt2 "${small[@]}" --seed 9 --steps 8 \
  --resume "$work/half.pt" --out "$work/resumed.safetensors"
cmp -s "$work/full.safetensors" "$work/resumed.safetensors" || fail "resuming did not continue the same training"
expect 1 "is not a gpt2 training state" train gpt2 "${small[@]}" --steps 8 --resume "$work/full.safetensors"
# bf16 autocast on the CPU: trains, and the loss drops as in float32
expect 0 "bf16 autocast" train gpt2 --train "$work/text.txt" "${tiny[@]}" --steps 40 --lr 3e-3 --dtype bf16 \
  --eval-iters 1 --sample-tokens 0 --out ""
read -r first last < <(sed -n 's/^first loss \([0-9.]*\), final train loss \([0-9.]*\)$/\1 \2/p' <<<"$out")
awk -v f="$first" -v l="$last" 'BEGIN { exit !(l < 0.7 * f) }' || fail "bf16: loss did not drop: $first -> $last"
# --synthetic: random tokens over GPT-2's padded vocabulary
expect 0 "synthetic tokens (one random batch), vocabulary 50304" train gpt2 --synthetic "${tiny[@]}" --steps 2 \
  --eval-iters 1 --sample-tokens 0 --out ""
echo "train_gpt2_cli: ok"
