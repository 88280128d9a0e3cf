/* MD5 as RFC 1321 specifies it: 64-byte blocks, four rounds of sixteen steps, the
 * sine-derived constants computed once as floor(|sin(i + 1)| * 2^32). */
#include <math.h>
#include <pthread.h>
#include <string.h>

#include "util/md5.h"

static uint32_t K[64];
static pthread_once_t k_once = PTHREAD_ONCE_INIT;

static void k_init(void) {
    for (int i = 0; i < 64; i++)
        K[i] = (uint32_t)(fabs(sin((double)(i + 1))) * 4294967296.0);
}

/* Per-step left rotations, four per round. */
static const uint8_t R[4][4] = {{7, 12, 17, 22}, {5, 9, 14, 20}, {4, 11, 16, 23}, {6, 10, 15, 21}};

static uint32_t rotl(uint32_t x, int n) { return (x << n) | (x >> (32 - n)); }

static void block(uint32_t h[4], const uint8_t p[64]) {
    uint32_t m[16];
    for (int i = 0; i < 16; i++)
        m[i] = (uint32_t)p[4 * i] | (uint32_t)p[4 * i + 1] << 8 | (uint32_t)p[4 * i + 2] << 16 |
               (uint32_t)p[4 * i + 3] << 24;
    uint32_t a = h[0], b = h[1], c = h[2], d = h[3];
    for (int i = 0; i < 64; i++) {
        uint32_t f;
        int g, round = i / 16;
        switch (round) {
        case 0: f = (b & c) | (~b & d); g = i; break;
        case 1: f = (d & b) | (~d & c); g = (5 * i + 1) % 16; break;
        case 2: f = b ^ c ^ d; g = (3 * i + 5) % 16; break;
        default: f = c ^ (b | ~d); g = (7 * i) % 16; break;
        }
        uint32_t t = d;
        d = c;
        c = b;
        b = b + rotl(a + f + K[i] + m[g], R[round][i % 4]);
        a = t;
    }
    h[0] += a;
    h[1] += b;
    h[2] += c;
    h[3] += d;
}

void ct_md5_init(ct_md5_ctx *c) {
    pthread_once(&k_once, k_init);
    c->h[0] = 0x67452301u;
    c->h[1] = 0xefcdab89u;
    c->h[2] = 0x98badcfeu;
    c->h[3] = 0x10325476u;
    c->nbytes = 0;
    c->nbuf = 0;
}

void ct_md5_update(ct_md5_ctx *c, const void *data, size_t len) {
    const uint8_t *p = data;
    c->nbytes += len;
    while (len > 0) {
        size_t take = 64 - c->nbuf < len ? 64 - c->nbuf : len;
        memcpy(c->buf + c->nbuf, p, take);
        c->nbuf += take;
        p += take;
        len -= take;
        if (c->nbuf == 64) {
            block(c->h, c->buf);
            c->nbuf = 0;
        }
    }
}

void ct_md5_final(ct_md5_ctx *c, uint8_t digest[16]) {
    uint64_t bits = c->nbytes * 8;
    static const uint8_t pad[64] = {0x80};
    size_t padlen = c->nbuf < 56 ? 56 - c->nbuf : 120 - c->nbuf;
    ct_md5_update(c, pad, padlen);
    uint8_t len8[8];
    for (int i = 0; i < 8; i++)
        len8[i] = (uint8_t)(bits >> (8 * i));
    ct_md5_update(c, len8, 8);
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++)
            digest[4 * i + j] = (uint8_t)(c->h[i] >> (8 * j));
}

void ct_md5_hex(const void *data, size_t len, char hex[33]) {
    static const char digits[] = "0123456789abcdef";
    ct_md5_ctx c;
    uint8_t d[16];
    ct_md5_init(&c);
    ct_md5_update(&c, data, len);
    ct_md5_final(&c, d);
    for (int i = 0; i < 16; i++) {
        hex[2 * i] = digits[d[i] >> 4];
        hex[2 * i + 1] = digits[d[i] & 15];
    }
    hex[32] = '\0';
}
