/* bench/train_char_gpt: ms per training step of the character GPT of `ctorch train
 * char-gpt`, in shared/bench/torch_peer.py's configurations (bench/gpt_bench.h says
 * what a step is and what is printed):
 *
 *   bench/train_char_gpt [--threads N] [--steps N] [--warmup N]
 *       on the CPU, torch_peer.py --what char-cpu: vocab 65, block 64, 4 layers,
 *       4 heads, embd 128, batch 16, 10 steps after 2: char.cpu.eager.*
 *   bench/train_char_gpt --device cuda [--precision bf16|tf32|fp32] [--steps N] ...
 *       on a GPU, torch_peer.py --what char: block 256, 6 layers, 6 heads, embd 384,
 *       batch 64, 20 steps after 5: char.<precision>.eager.*
 *
 * The CPU figures include the median process CPU time per step
 * (char.cpu.eager.cpu_ms_per_step), which other load on the machine disturbs less than
 * wall time. */
#include "gpt_bench.h"

int main(int argc, char **argv) {
    ct_runtime_tune_and_reexec(argv); /* as the ctorch CLI runs */
    gpt_bench b = {.steps = -1, .warmup = -1, .batch = -1, .device = CT_CPU, .precision = "fp32"};
    bool gpu = false;
    for (int i = 1; i + 1 < argc; i += 2)
        gpu |= strcmp(argv[i], "--device") == 0 && strncmp(argv[i + 1], "cuda", 4) == 0;
    if (gpu) {
        b.cfg = (ct_char_gpt_config){.vocab = 65, .block = 256, .n_layer = 6, .n_head = 6, .n_embd = 384};
        b.batch = 64, b.steps = 20, b.warmup = 5, b.precision = "bf16";
    } else {
        b.cfg = (ct_char_gpt_config){.vocab = 65, .block = 64, .n_layer = 4, .n_head = 4, .n_embd = 128};
        b.batch = 16, b.steps = 10, b.warmup = 2;
    }
    if (!gpt_bench_args(&b, argc, argv)) {
        fprintf(stderr, "usage: train_char_gpt [--device cpu|cuda] [--precision fp32|tf32|bf16] [--threads N] "
                        "[--steps N>=1] [--warmup N>=0] [--batch B>=1] [--shape V,T,L,H,D]\n");
        return 2;
    }
    char name[64];
    snprintf(name, sizeof name, "char.%s", b.device.type == CT_DEVICE_CPU ? "cpu" : b.precision);
    b.name = name;
    return gpt_bench_run("train_char_gpt", &b);
}
