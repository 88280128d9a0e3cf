/* bench/train_gpt2: ms per training step of GPT-2 124M (vocabulary 50304, block 1024,
 * 12 layers, 12 heads, embd 768) at shared/bench/torch_peer.py's gpt2 configuration,
 * on a GPU (bench/gpt_bench.h says what a step is and what is printed).
 *
 *   bench/train_gpt2 [--device cuda] [--precision bf16|tf32|fp32] [--batch 32]
 *                    [--steps 20] [--warmup 5] [--threads N]
 *
 * --init FILE.pt --losses 1 starts from the weights and batch of a PyTorch checkpoint
 * and prints every step's loss (scripts/gpt2_parity.py compares them with PyTorch's).
 *
 * Figures are named as torch_peer.py --what gpt2 --gpt2-batch B --precision P names
 * PyTorch's eager ones: gpt2_124m.bB.P.eager.*. */
#include "gpt_bench.h"

int main(int argc, char **argv) {
    gpt_bench b = {.cfg = {.vocab = 50304, .block = 1024, .n_layer = 12, .n_head = 12, .n_embd = 768},
                   .batch = 32, .steps = 20, .warmup = 5, .device = CT_CUDA(0), .precision = "bf16"};
    if (!gpt_bench_args(&b, argc, argv)) {
        fprintf(stderr, "usage: train_gpt2 [--device cuda|cpu] [--precision bf16|tf32|fp32] [--batch B>=1] "
                        "[--steps N>=1] [--warmup N>=0] [--threads N] [--init FILE.pt --losses 1]\n");
        return 2;
    }
    char name[64];
    snprintf(name, sizeof name, "gpt2_124m.b%lld.%s", (long long)b.batch, b.precision);
    b.name = name;
    return gpt_bench_run("train_gpt2", &b);
}
