#!/usr/bin/env bash
# make bench: runs ctorch's benchmarks and, where PyTorch is installed, PyTorch's side of
# the same workloads in the same run, then prints both with their ratios.
set -euo pipefail
build=${1:-build}
here=$(cd "$(dirname "$0")/.." && pwd)
out=$(mktemp -d)
"$build/bench/ops" | tee "$out/ctorch.txt"
# the Fashion-MNIST CNN of `ctorch train fashion-mnist` (torch_peer.py's cnn)
"$build/bench/train_cnn" | tee -a "$out/ctorch.txt"
# the character GPT of `ctorch train char-gpt` (torch_peer.py's char-cpu model)
"$build/bench/train_char_gpt" --threads "$(nproc)" | tee -a "$out/ctorch.txt"
peer="$here/../shared/bench/torch_peer.py"
py=""
for p in python3 /usr/bin/python3; do
  if "$p" -c "import torch" 2>/dev/null; then py=$p; break; fi
done
if [ -n "$py" ] && [ -f "$peer" ]; then
  # torch_peer_compat.py supplies F.scaled_dot_product_attention on PyTorch < 2.0
  "$py" "$here/bench/torch_peer_compat.py" "$peer" --device cpu --what ops,cnn,char-cpu --threads "$(nproc)" \
    | tee "$out/torch.txt"
  # the lines torch_peer.py does not print (copy, mul, exp, softmax)
  "$py" "$here/bench/torch_ops.py" --threads "$(nproc)" | tee -a "$out/torch.txt"
  echo
  python3 "$here/bench/compare.py" "$out/ctorch.txt" "$out/torch.txt"
else
  echo "(PyTorch or shared/bench/torch_peer.py not found: no side-by-side figures)"
fi
rm -rf "$out"
