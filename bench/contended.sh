#!/usr/bin/env bash
# bench/run.sh --contended [build]: the CPU training steps (the Fashion-MNIST CNN and
# the character GPT) on a few cores, quiet and then with a busy loop on one of them, as
# when another job shares the machine. CORES (default: the last two CPUs) is the
# taskset list the job runs on; the busy loop spins on the last of them; THREADS
# (default: as many as CORES) is the job's thread count; ROUNDS (default 3) how many
# times each quiet and busy pair runs, alternating. Prints each step time quiet and busy
# and their ratio, the medians over the rounds and every round's ratio; with PyTorch and
# shared/bench/torch_peer.py, PyTorch's too.
set -euo pipefail
build=${1:-build}
here=$(cd "$(dirname "$0")/.." && pwd)
n=$(nproc)
cores=${CORES:-$((n > 1 ? n - 2 : 0)),$((n - 1))}
busy_core=${cores##*,}
ncores=$(echo "$cores" | tr ',' '\n' | wc -l)
threads=${THREADS:-$ncores}
peer="$here/../shared/bench/torch_peer.py"
py=""
if [ -f "$peer" ]; then
  for p in python3 /usr/bin/python3; do
    if "$p" -c "import torch" 2>/dev/null; then py=$p; break; fi
  done
fi
spin_pid=""
stop_spin() { [ -z "$spin_pid" ] || kill "$spin_pid" 2>/dev/null || true; spin_pid=""; }
trap stop_spin EXIT
step_ms() { grep -E "$1" | head -1 | awk '{print $2}'; }
run() { # name, load, command...
  local name=$1 load=$2
  shift 2
  if [ "$load" = busy ]; then
    taskset -c "$busy_core" sh -c 'while :; do :; done' &
    spin_pid=$!
  fi
  local ms
  ms=$(taskset -c "$cores" "$@" 2>/dev/null | step_ms "(cnn.*|char.*)\.ms_per_step")
  stop_spin
  echo "${ms:-nan}"
}
rounds=${ROUNDS:-3}
echo "cores $cores, busy loop on $busy_core, $threads threads, $rounds rounds"
printf "%-28s %10s %10s %7s  %s\n" "step (medians)" "quiet ms" "busy ms" "ratio" "ratio of each round"
median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print "nan"; else if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
ratio() { awk -v q="$1" -v b="$2" 'BEGIN{ if (q > 0) printf "%.2fx", b / q; else print "-" }'; }
pairs() { # name, command...: ROUNDS alternating quiet and busy runs, one line
  local name=$1 qs="" bs="" each="" q s
  shift
  for ((r = 0; r < rounds; r++)); do
    q=$(run "$name" quiet "$@")
    s=$(run "$name" busy "$@")
    qs="$qs $q" bs="$bs $s" each="$each $(ratio "$q" "$s")"
  done
  q=$(echo "$qs" | median | awk '{ printf "%.2f", $1 }') s=$(echo "$bs" | median | awk '{ printf "%.2f", $1 }')
  printf "%-28s %10s %10s %7s  %s\n" "$name" "$q" "$s" "$(ratio "$q" "$s")" "${each# }"
}
for b in cnn char; do
  if [ $b = cnn ]; then cmd=(env OMP_NUM_THREADS="$threads" "$build/bench/train_cnn")
  else cmd=("$build/bench/train_char_gpt" --threads "$threads"); fi
  pairs "ctorch $b" "${cmd[@]}"
  if [ -n "$py" ]; then
    what=$([ $b = cnn ] && echo cnn || echo char-cpu)
    pairs "pytorch $b" "$py" "$here/bench/torch_peer_compat.py" "$peer" --device cpu --what "$what" --threads "$threads"
  fi
done
