/* Checkpoint loading and saving through the public API only (so the same file builds
 * against any libctorch): a synthetic state_dict of NT float32 tensors totalling about
 * MIB MiB, as safetensors and as .pt, then the median wall time of each operation
 * over REPS runs with the file in the page cache.
 *   bench/io [MIB [NT [REPS [DIR]]]]      defaults: 1024 MiB, 2000 tensors, 9 runs, /tmp
 * ct_load of safetensors maps the file (zero-copy): its time is the header's parse
 * and one tensor object per entry; CT_SAFETENSORS_COPY=1 and .pt copy every byte. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ctorch.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static void die(const char *what) {
    fprintf(stderr, "bench/io: %s: %s\n", what, ct_last_error());
    exit(1);
}

/* Loads path and checks one element of the last tensor, so that a lazy mapping is
 * touched once (the tensor's first page), as any use would. */
static double time_load(const char *path, int64_t nt) {
    double t0 = now_s();
    ct_value *v = ct_load(path);
    if (!v)
        die(path);
    ct_scope_begin();
    double x = 0;
    if (ct_value_len(v) < nt || ct_item_double(ct_select(ct_reshape(ct_value_tensor(ct_value_at(v, -1)), CT_SHAPE(-1)), 0, 0), &x))
        die("reading back");
    ct_scope_end();
    ct_value_free(v);
    return now_s() - t0;
}

int main(int argc, char **argv) {
    int64_t mib = argc > 1 ? atoll(argv[1]) : 1024;
    int64_t nt = argc > 2 ? atoll(argv[2]) : 2000;
    int reps = argc > 3 ? atoi(argv[3]) : 9;
    const char *dir = argc > 4 ? argv[4] : "/tmp";
    if (mib < 1 || nt < 1 || reps < 1 || reps > 99) {
        fprintf(stderr, "usage: bench/io [MIB [NT [REPS [DIR]]]]\n");
        return 2;
    }
    char st_path[512], pt_path[512];
    snprintf(st_path, sizeof st_path, "%s/bench_io_%ld.safetensors", dir, (long)getpid());
    snprintf(pt_path, sizeof pt_path, "%s/bench_io_%ld.pt", dir, (long)getpid());
    int64_t per = mib * 1024 * 1024 / 4 / nt; /* float32 elements per tensor */
    if (per < 1)
        per = 1;
    ct_scope_begin();
    ct_value *sd = ct_value_new_dict();
    char name[64];
    for (int64_t i = 0; i < nt; i++) {
        snprintf(name, sizeof name, "layers.%lld.weight", (long long)i);
        ct_tensor *t = ct_full(CT_SHAPE(per), ct_scalar_float((double)i), CT_F32, CT_CPU);
        if (!t || ct_value_set(sd, name, ct_value_new_tensor(t)) != CT_OK)
            die("building the state_dict");
    }
    ct_scope_end();
    double save_st[99], save_pt[99], load_st[99], load_st_copy[99], load_pt[99];
    for (int r = 0; r < reps; r++) {
        double t0 = now_s();
        if (ct_save_safetensors(st_path, sd, NULL) != CT_OK)
            die("ct_save_safetensors");
        save_st[r] = now_s() - t0;
        t0 = now_s();
        if (ct_save_pt(pt_path, sd) != CT_OK)
            die("ct_save_pt");
        save_pt[r] = now_s() - t0;
    }
    time_load(st_path, nt); /* warm the page cache */
    time_load(pt_path, nt);
    for (int r = 0; r < reps; r++) {
        load_st[r] = time_load(st_path, nt);
        setenv("CT_SAFETENSORS_COPY", "1", 1);
        load_st_copy[r] = time_load(st_path, nt);
        unsetenv("CT_SAFETENSORS_COPY");
        load_pt[r] = time_load(pt_path, nt);
    }
    printf("%lld tensors, %.0f MiB, median of %d runs:\n", (long long)nt, (double)(per * 4 * nt) / (1 << 20), reps);
    printf("  ct_load safetensors (mapped)      %9.3f ms\n", 1e3 * median(load_st, reps));
    printf("  ct_load safetensors (copy)        %9.3f ms\n", 1e3 * median(load_st_copy, reps));
    printf("  ct_load .pt                       %9.3f ms\n", 1e3 * median(load_pt, reps));
    printf("  ct_save_safetensors               %9.3f ms\n", 1e3 * median(save_st, reps));
    printf("  ct_save_pt                        %9.3f ms\n", 1e3 * median(save_pt, reps));
    ct_value_free(sd);
    unlink(st_path);
    unlink(pt_path);
    return 0;
}
