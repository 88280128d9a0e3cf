#!/usr/bin/env bash
# ctorch train char-gpt: argument and input errors, then a short run on a generated text:
# the loss must drop, the checkpoint must hold the weights, the sample must have the
# requested length and only characters of the text. One thread: on a busy machine
# every parallel region waits for a second core, which costs more than it gives here.
set -u
ctorch=$1 work=$2
mkdir -p "$work"
. "$(dirname "$0")/lib.sh" # fail, expect
# a text over the alphabet "abcdefgh", spaces and newlines: words of a small
# deterministic sequence (a linear congruential generator), 6 words a line
text=$work/text.txt
words=(abc bad cafe dead face fee hag bead gab head)
s=7 line="" out_text=""
for i in $(seq 1 900); do
  s=$(( (s * 1103515245 + 12345) % 2147483648 ))
  line+="${words[$(( (s >> 16) % 10 ))]}"
  if (( i % 6 == 0 )); then out_text+="$line"$'\n'; line=""; else line+=" "; fi
done
printf '%s' "$out_text" >"$text"
printf 'abcdefgh\n' >"$work/short.txt"
: >"$work/empty.txt"

expect 0 "char-gpt" train --help
expect 0 "no bundled text" train char-gpt --help
expect 2 "unknown job 'nope'" train nope
expect 2 "--text FILE is required" train char-gpt
expect 2 "unknown preset 'huge'" train char-gpt --text "$text" --preset huge
expect 2 "invalid value 'abc' for --steps" train char-gpt --text "$text" --steps abc
expect 2 "invalid value '0' for --steps" train char-gpt --text "$text" --steps 0
expect 2 "invalid value '-1' for --lr" train char-gpt --text "$text" --lr -1
expect 2 "invalid value '1.5' for --dropout" train char-gpt --text "$text" --dropout 1.5
expect 2 "must be a multiple of --heads" train char-gpt --text "$text" --embd 30 --heads 4
expect 2 "unknown option '--bogus'" train char-gpt --text "$text" --bogus 1
expect 2 "--steps needs a value" train char-gpt --text "$text" --steps
expect 2 "unexpected argument 'extra'" train char-gpt --text "$text" extra
expect 2 "--cuda-graphs needs --device cuda" train char-gpt --text "$text" --cuda-graphs
expect 2 "--cuda-graphs does not take --dtype fp16" train char-gpt --text "$text" --device cuda --dtype fp16 \
  --cuda-graphs
expect 1 "cannot open" train char-gpt --text "$work/no-such-file.txt"
expect 1 "is empty" train char-gpt --text "$work/empty.txt"
expect 1 "too short" train char-gpt --text "$work/short.txt" --block-size 4
expect 2 "not in the vocabulary" train char-gpt --text "$text" --prompt "xyz" --steps 1 --block-size 8 \
  --layers 1 --embd 8 --heads 2 --eval-iters 1 --out "$work/unused.safetensors"

# the default preset builds torch_peer's char-cpu shape (its parameter count against
# PyTorch's is test_char_gpt_model's job); one step is enough to see it run
expect 0 "4 layers, 4 heads, embd 128, block 64" train char-gpt --text "$text" --steps 1 --eval-iters 1 --threads 1 \
  --sample-tokens 0 --out "$work/cpu.safetensors" --quiet

expect 0 "sample (60 characters" train char-gpt --text "$text" --steps 60 --batch-size 8 --block-size 16 \
  --layers 1 --heads 2 --embd 32 --lr 1e-2 --eval-interval 30 --eval-iters 2 --sample-tokens 60 \
  --temperature 0.8 --top-k 5 --seed 3 --threads 1 --out "$work/gpt.safetensors" --sample-out "$work/sample.txt" --quiet
grep -q "step 30: train loss .*, val loss" <<<"$out" || fail "no validation loss at step 30: $out"
read -r first last < <(sed -n 's/^first loss \([0-9.]*\), final train loss \([0-9.]*\)$/\1 \2/p' <<<"$out")
[ -n "${first:-}" ] && [ -n "${last:-}" ] || fail "no loss summary: $out"
awk -v f="$first" -v l="$last" 'BEGIN { exit !(l < 0.8 * f) }' || fail "loss did not drop: $first -> $last"
[ -f "$work/gpt.safetensors" ] || fail "no checkpoint written"
[ "$(wc -c <"$work/sample.txt")" -eq 60 ] || fail "the sample has $(wc -c <"$work/sample.txt") bytes, not 60"
[ -z "$(LC_ALL=C tr -d 'abcdefgh \n' <"$work/sample.txt")" ] || fail "the sample has characters outside the text"
# --profile: a Chrome trace of the steps with the model's ops in it
rm -f "$work/trace.json"
expect 0 "profile: $work/trace.json" train char-gpt --text "$text" --steps 3 --batch-size 4 --block-size 8 \
  --layers 1 --heads 2 --embd 16 --eval-iters 1 --sample-tokens 0 --threads 1 --out "" --profile "$work/trace.json" --quiet
if command -v python3 >/dev/null; then
  src=$(cd "$(dirname "$0")/../.." && pwd)
  python3 "$src/scripts/check_trace.py" -q "$work/trace.json" --expect-span scaled_dot_product_attention \
    --expect-span layer_norm --min-spans 50 || fail "the char-gpt trace is not valid Chrome trace JSON"
fi
expect 1 "" train char-gpt --text "$text" --steps 1 --block-size 8 --layers 1 --heads 2 --embd 16 --eval-iters 1 \
  --sample-tokens 0 --out "" --profile "$work/no-such-dir/trace.json" --quiet
expect 0 "blocks.0.qkv.weight" inspect "$work/gpt.safetensors"
grep -q "wte.weight" <<<"$out" || fail "checkpoint lacks wte.weight: $out"
# the training state beside the weights: 4 steps, then --resume to 8, must give the
# weights of 8 steps in one go, byte for byte (dropout 0, one thread)
small=(--text "$text" --batch-size 4 --block-size 8 --layers 1 --heads 2 --embd 16 --eval-iters 1
       --eval-interval 100 --sample-tokens 0 --threads 1 --seed 11 --quiet)
expect 0 "saved $work/full.safetensors and $work/full.pt" train char-gpt "${small[@]}" --steps 8 \
  --out "$work/full.safetensors"
expect 0 "$work/half.pt (training state)" train char-gpt "${small[@]}" --steps 4 --out "$work/half.safetensors"
expect 0 "resumed from $work/half.pt after step 4 (seed 11)" train char-gpt "${small[@]}" --seed 99 --steps 8 \
  --resume "$work/half.pt" --out "$work/resumed.safetensors"
cmp -s "$work/full.safetensors" "$work/resumed.safetensors" || fail "resuming did not continue the same training"
expect 0 "already at step 8 of 6" train char-gpt "${small[@]}" --steps 6 --resume "$work/full.pt" --out ""
expect 1 "is not a char-gpt training state" train char-gpt "${small[@]}" --steps 8 --resume "$work/full.safetensors"
expect 1 "another shape than this model's" train char-gpt "${small[@]}" --embd 32 --steps 8 --resume "$work/half.pt"
expect 1 "has no tensor 'blocks.1." train char-gpt "${small[@]}" --layers 2 --steps 8 --resume "$work/half.pt"
expect 1 "No such file\\|cannot open" train char-gpt "${small[@]}" --steps 8 --resume "$work/missing.pt"
# --compile under bf16 autocast (Note [Autocast under capture] in src/compile/capture.c):
# the replays run what the eager steps run, so the weights are the same byte for byte
expect 0 "saved" train char-gpt "${small[@]}" --steps 8 --dtype bf16 --out "$work/amp.safetensors"
expect 0 "saved" train char-gpt "${small[@]}" --steps 8 --dtype bf16 --compile --out "$work/amp-compiled.safetensors"
cmp -s "$work/amp.safetensors" "$work/amp-compiled.safetensors" || fail "--compile --dtype bf16 trained other weights"
expect 2 "--compile does not take --dtype fp16" train char-gpt --text "$text" --device cuda --dtype fp16 --compile
# the learning-rate schedule (Note [Learning-rate schedule] in src/cli/cmd_train_gpt.c):
# bad arguments are refused; the constant default prints no schedule; nanoGPT's linear
# warm-up and cosine decay give the rates printed at each validation; a resumed run goes
# on with the schedule and gives the weights of the run in one go, byte for byte
expect 2 "unknown --lr-schedule 'linear' (constant or cosine)" train char-gpt --text "$text" --lr-schedule linear
expect 2 "--warmup-steps must be >= 0, got -1" train char-gpt --text "$text" --warmup-steps -1
expect 2 "--min-lr (0.1) must not exceed --lr (0.01)" train char-gpt --text "$text" --lr 1e-2 --lr-schedule cosine \
  --min-lr 0.1
expect 2 "--min-lr and --lr-decay-steps go with --lr-schedule cosine" train char-gpt --text "$text" --min-lr 1e-4
expect 2 "--lr-decay-steps (4) must be greater than --warmup-steps (4)" train char-gpt --text "$text" \
  --lr-schedule cosine --warmup-steps 4 --lr-decay-steps 4
expect 2 "invalid value 'x' for --warmup-steps" train char-gpt --text "$text" --warmup-steps x
expect 0 "batch 4, lr 0.0003, cpu" train char-gpt "${small[@]}" --steps 1 --out ""
sched=(--lr 1e-2 --lr-schedule cosine --warmup-steps 2 --lr-decay-steps 6 --min-lr 1e-3 --eval-interval 1)
expect 0 "lr 0.01 (2 warm-up steps, cosine to 0.001 at step 6)" train char-gpt "${small[@]}" "${sched[@]}" \
  --steps 8 --out "$work/sched.safetensors"
for want in "step 1: .*, lr 0.00333333 " "step 3: .*, lr 0.01 " "step 4: .*, lr 0.00868198 " "step 6: .*, lr 0.00231802 " \
            "step 7: .*, lr 0.001 " "step 8: .*, lr 0.001 "; do
  grep -q "$want" <<<"$out" || fail "no '$want' in the scheduled run: $out"
done
expect 0 "(2 warm-up steps)" train char-gpt "${small[@]}" --warmup-steps 2 --steps 1 --out ""
expect 0 "saved" train char-gpt "${small[@]}" "${sched[@]}" --steps 5 --out "$work/sched-half.safetensors"
expect 0 "resumed from $work/sched-half.pt after step 5" train char-gpt "${small[@]}" "${sched[@]}" --steps 8 \
  --resume "$work/sched-half.pt" --out "$work/sched-resumed.safetensors"
grep -q "step 6: .*, lr 0.00231802 " <<<"$out" || fail "the resumed run did not go on with the schedule: $out"
cmp -s "$work/sched.safetensors" "$work/sched-resumed.safetensors" || fail "resuming did not continue the schedule"
expect 0 "saved" train char-gpt "${small[@]}" --lr 1e-2 --steps 8 --out "$work/const.safetensors"
cmp -s "$work/sched.safetensors" "$work/const.safetensors" && fail "the schedule changed nothing"
echo "train_char_gpt_cli: ok"
