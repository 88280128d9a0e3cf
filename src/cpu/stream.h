/* Streaming (non-temporal) stores for the outputs of long contiguous loops
 * (Note [Streaming stores]). */
#ifndef CT_CPU_STREAM_H
#define CT_CPU_STREAM_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <emmintrin.h>
#define CT_STREAM_X86 1
#endif

/* Note [Streaming stores]
 * A plain store to a line that is not in the cache first reads the line from memory
 * ("read for ownership"), so c = a * b over arrays far larger than the caches moves
 * four bytes per byte of c, not three, and the result then evicts data that is still
 * wanted. A streaming store writes whole lines straight to memory. glibc's memcpy and
 * memset switch to them above a size; ctorch's elementwise loops, copies and casts,
 * fills and the SLEEF routines do too:
 *  - when the op as a whole touches at least a quarter of the last-level cache (every
 *    operand's bytes, over all the threads running it; CT_STREAM_MIN_BYTES in the
 *    environment sets another threshold, a huge one turns streaming off). Below that,
 *    the output may still be in the cache when the next op reads it, and a streamed
 *    one would not be. A quarter, not all of it: the L3 is shared with the other
 *    cores (and on a virtual machine with other guests). The GPU machine's Xeon
 *    reports 300 MB of L3, yet on two of its cores copy, add, mul and exp over 16M
 *    float32 (128-192 MB touched) ran 20-50% faster streamed (four pairs, alternating);
 *  - and the one call writes at least CT_STREAM_MIN_CALL bytes, so short runs never pay
 *    for the decision.
 * The loop computes one 64-byte line at a time into a local buffer with the same
 * expression as the plain loop (so the results are the same bits; test_loops_isa checks
 * it) and streams the line; the part before the first 64-byte boundary and the tail
 * take plain stores. A fence at the end orders the streamed lines before whatever the
 * thread does next (OpenMP's barrier then publishes them to the other threads).
 * Measured on two cores of a Xeon with 105 MB of L3, 16M float32 mul went from 19.6 to
 * 24-26 GB/s with streaming; computing whole 4 KiB blocks first and streaming them
 * afterwards gained nothing, as loads and stores then no longer overlap. */
#define CT_STREAM_MIN_CALL ((int64_t)1 << 20)

/* Whether a call that touches `bytes` bytes (all operands) should stream its output o,
 * of elements of `size` bytes (the output must be aligned to its element). */
bool ct_stream_decide(int64_t bytes);
extern int64_t ct_stream_min_call; /* CT_STREAM_MIN_CALL; 0 under CT_STREAM_ALWAYS */
static inline bool ct_stream_wanted(int64_t bytes, const void *o, size_t size) {
#ifdef CT_STREAM_X86
    return bytes >= __atomic_load_n(&ct_stream_min_call, __ATOMIC_RELAXED) && (uintptr_t)o % size == 0 &&
           ct_stream_decide(bytes);
#else
    (void)bytes, (void)o, (void)size;
    return false;
#endif
}
/* For tests: stream every call, however short (CT_STREAM_ALWAYS), none
 * (CT_STREAM_NEVER), or back to the thresholds (CT_STREAM_AUTO). */
enum { CT_STREAM_AUTO = 0, CT_STREAM_ALWAYS = 1, CT_STREAM_NEVER = 2 };
void ct_stream_force(int mode);

/* Writes the 64 bytes at src to dst (64-byte aligned) with streaming stores. */
static inline void ct_stream_line(void *dst, const void *src) {
#ifdef CT_STREAM_X86
    __m128i *d = (__m128i *)dst;
    const __m128i *s = (const __m128i *)src;
    _mm_stream_si128(d, _mm_loadu_si128(s));
    _mm_stream_si128(d + 1, _mm_loadu_si128(s + 1));
    _mm_stream_si128(d + 2, _mm_loadu_si128(s + 2));
    _mm_stream_si128(d + 3, _mm_loadu_si128(s + 3));
#else
    memcpy(dst, src, 64);
#endif
}
static inline void ct_stream_fence(void) {
#ifdef CT_STREAM_X86
    _mm_sfence();
#endif
}

/* memcpy of a contiguous run, streaming the destination when the copy is long enough. */
static inline void ct_stream_copy(char *dst, const char *src, size_t bytes) {
    if (!ct_stream_wanted(2 * (int64_t)bytes, dst, 1)) {
        memcpy(dst, src, bytes);
        return;
    }
    size_t head = (64u - (uintptr_t)dst % 64u) % 64u, k;
    if (head > bytes) /* a short copy (CT_STREAM_ALWAYS) ends before the first line */
        head = bytes;
    memcpy(dst, src, head);
    for (k = head; k + 64 <= bytes; k += 64)
        ct_stream_line(dst + k, src + k);
    ct_stream_fence();
    memcpy(dst + k, src + k, bytes - k);
}

/* The line's loop is one vector operation or two; GCC vectorizes it whole only when
 * told to (without the pragma it splits the 16 floats into 8 + 4 + 2 + 1 + 1). Not for
 * clang, which warns about every such loop it cannot vectorize (the sanitizer builds). */
#if defined(_OPENMP) && !defined(__clang__)
#define CT_STREAM_SIMD _Pragma("omp simd")
#else
#define CT_STREAM_SIMD
#endif

/* The contiguous run o[J] = VALUE for J in [0, n), where VALUE is an expression of the
 * index J (a variable this macro declares); OT is o's element type and touched the
 * bytes of all operands per element. Streams the output when ct_stream_wanted says so. */
#define CT_CONTIG_RUN(OT, o, n, touched, J, VALUE)                                             \
    do {                                                                                       \
        int64_t done_ = 0;                                                                     \
        if (ct_stream_wanted((n) * (int64_t)(touched), (const void *)(o), sizeof(OT))) {       \
            enum { LINE_ = 64 / (int)sizeof(OT) };                                             \
            int64_t head_ = (int64_t)((64u - (uintptr_t)(o) % 64u) % 64u / sizeof(OT));        \
            if (head_ > (n))                                                                   \
                head_ = (n);                                                                   \
            for (int64_t J = 0; J < head_; J++)                                                \
                (o)[J] = VALUE;                                                                \
            for (done_ = head_; done_ + LINE_ <= (n); done_ += LINE_) {                        \
                OT line_[LINE_];                                                               \
                CT_STREAM_SIMD                                                                 \
                for (int k_ = 0; k_ < LINE_; k_++) {                                           \
                    const int64_t J = done_ + k_;                                              \
                    line_[k_] = VALUE;                                                         \
                }                                                                              \
                ct_stream_line((o) + done_, line_);                                            \
            }                                                                                  \
            ct_stream_fence();                                                                 \
        }                                                                                      \
        for (int64_t J = done_; J < (n); J++)                                                  \
            (o)[J] = VALUE;                                                                    \
    } while (0)

#endif /* CT_CPU_STREAM_H */
