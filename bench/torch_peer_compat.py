"""Runs shared/bench/torch_peer.py under PyTorch releases that predate
F.scaled_dot_product_attention (2.0), such as the 1.13 that Debian ships.

    python3 bench/torch_peer_compat.py PATH/torch_peer.py --device cpu --what char-cpu --threads 2

On 1.13 the missing function is PyTorch's own private kernel of the same computation,
torch.nn.functional._scaled_dot_product_attention (its math path: matmul, softmax,
matmul, differentiated by autograd). On newer releases the script changes nothing.
"""
import runpy
import sys

import torch.nn.functional as F

if not hasattr(F, "scaled_dot_product_attention"):
    def scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False):
        # 1.13's signature: (q, k, v, attn_mask, dropout_p, need_attn_weights, is_causal)
        return F._scaled_dot_product_attention(q, k, v, attn_mask, dropout_p, False, is_causal)[0]

    F.scaled_dot_product_attention = scaled_dot_product_attention

if len(sys.argv) < 2:
    sys.exit(__doc__)
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
