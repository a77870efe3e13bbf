// MD5 (RFC 1321) in 16 or 8 lanes at once. Each lane runs the ordinary algorithm on its own
// string; a vector instruction does one step for all lanes. The message words of a block are
// fetched with a gather: lane i's word j is at base + i * stride + 4 * j.

#include "multi_md5.h"

#include <string.h>

#if defined(__x86_64__)
#include <immintrin.h>

static const uint32_t K[64] = {
    0xd76aa478, 0xe8c7b756, 0x242070db, 0xc1bdceee, 0xf57c0faf, 0x4787c62a, 0xa8304613, 0xfd469501,
    0x698098d8, 0x8b44f7af, 0xffff5bb1, 0x895cd7be, 0x6b901122, 0xfd987193, 0xa679438e, 0x49b40821,
    0xf61e2562, 0xc040b340, 0x265e5a51, 0xe9b6c7aa, 0xd62f105d, 0x02441453, 0xd8a1e681, 0xe7d3fbc8,
    0x21e1cde6, 0xc33707d6, 0xf4d50d87, 0x455a14ed, 0xa9e3e905, 0xfcefa3f8, 0x676f02d9, 0x8d2a4c8a,
    0xfffa3942, 0x8771f681, 0x6d9d6122, 0xfde5380c, 0xa4beea44, 0x4bdecfa9, 0xf6bb4b60, 0xbebfbc70,
    0x289b7ec6, 0xeaa127fa, 0xd4ef3085, 0x04881d05, 0xd9d4d039, 0xe6db99e5, 0x1fa27cf8, 0xc4ac5665,
    0xf4292244, 0x432aff97, 0xab9423a7, 0xfc93a039, 0x655b59c3, 0x8f0ccc92, 0xffeff47d, 0x85845dd1,
    0x6fa87e4f, 0xfe2ce6e0, 0xa3014314, 0x4e0811a1, 0xf7537e82, 0xbd3af235, 0x2ad7d2bb, 0xeb86d391,
};

static const uint32_t initial[4] = {0x67452301, 0xefcdab89, 0x98badcfe, 0x10325476};

// One MD5 step: a = b + rotl(a + f(b, c, d) + K[i] + m[g], s), written for the vector width
// through ADD, FUNC_* and ROTL.
#define STEP(FUNC, a, b, c, d, i, g, s) \
    a = ADD(b, ROTL(ADD(ADD(a, FUNC(b, c, d)), ADD(SET1(K[i]), m[g])), s))

// The 64 steps of one block, in four rounds of sixteen (RFC 1321, 3.4).
#define ROUNDS                                                                                   \
    STEP(F, a, b, c, d, 0, 0, 7);   STEP(F, d, a, b, c, 1, 1, 12);  STEP(F, c, d, a, b, 2, 2, 17);   \
    STEP(F, b, c, d, a, 3, 3, 22);  STEP(F, a, b, c, d, 4, 4, 7);   STEP(F, d, a, b, c, 5, 5, 12);   \
    STEP(F, c, d, a, b, 6, 6, 17);  STEP(F, b, c, d, a, 7, 7, 22);  STEP(F, a, b, c, d, 8, 8, 7);    \
    STEP(F, d, a, b, c, 9, 9, 12);  STEP(F, c, d, a, b, 10, 10, 17); STEP(F, b, c, d, a, 11, 11, 22); \
    STEP(F, a, b, c, d, 12, 12, 7); STEP(F, d, a, b, c, 13, 13, 12); STEP(F, c, d, a, b, 14, 14, 17); \
    STEP(F, b, c, d, a, 15, 15, 22);                                                               \
    STEP(G, a, b, c, d, 16, 1, 5);  STEP(G, d, a, b, c, 17, 6, 9);  STEP(G, c, d, a, b, 18, 11, 14); \
    STEP(G, b, c, d, a, 19, 0, 20); STEP(G, a, b, c, d, 20, 5, 5);  STEP(G, d, a, b, c, 21, 10, 9);  \
    STEP(G, c, d, a, b, 22, 15, 14); STEP(G, b, c, d, a, 23, 4, 20); STEP(G, a, b, c, d, 24, 9, 5);  \
    STEP(G, d, a, b, c, 25, 14, 9); STEP(G, c, d, a, b, 26, 3, 14); STEP(G, b, c, d, a, 27, 8, 20);  \
    STEP(G, a, b, c, d, 28, 13, 5); STEP(G, d, a, b, c, 29, 2, 9);  STEP(G, c, d, a, b, 30, 7, 14);  \
    STEP(G, b, c, d, a, 31, 12, 20);                                                               \
    STEP(H, a, b, c, d, 32, 5, 4);  STEP(H, d, a, b, c, 33, 8, 11); STEP(H, c, d, a, b, 34, 11, 16); \
    STEP(H, b, c, d, a, 35, 14, 23); STEP(H, a, b, c, d, 36, 1, 4); STEP(H, d, a, b, c, 37, 4, 11);  \
    STEP(H, c, d, a, b, 38, 7, 16); STEP(H, b, c, d, a, 39, 10, 23); STEP(H, a, b, c, d, 40, 13, 4); \
    STEP(H, d, a, b, c, 41, 0, 11); STEP(H, c, d, a, b, 42, 3, 16); STEP(H, b, c, d, a, 43, 6, 23);  \
    STEP(H, a, b, c, d, 44, 9, 4);  STEP(H, d, a, b, c, 45, 12, 11); STEP(H, c, d, a, b, 46, 15, 16); \
    STEP(H, b, c, d, a, 47, 2, 23);                                                                \
    STEP(I, a, b, c, d, 48, 0, 6);  STEP(I, d, a, b, c, 49, 7, 10); STEP(I, c, d, a, b, 50, 14, 15); \
    STEP(I, b, c, d, a, 51, 5, 21); STEP(I, a, b, c, d, 52, 12, 6); STEP(I, d, a, b, c, 53, 3, 10);  \
    STEP(I, c, d, a, b, 54, 10, 15); STEP(I, b, c, d, a, 55, 1, 21); STEP(I, a, b, c, d, 56, 8, 6);  \
    STEP(I, d, a, b, c, 57, 15, 10); STEP(I, c, d, a, b, 58, 6, 15); STEP(I, b, c, d, a, 59, 13, 21); \
    STEP(I, a, b, c, d, 60, 4, 6);  STEP(I, d, a, b, c, 61, 11, 10); STEP(I, c, d, a, b, 62, 2, 15); \
    STEP(I, b, c, d, a, 63, 9, 21);

// AVX-512F: 16 lanes; each round function is one ternary-logic instruction.
#define ADD _mm512_add_epi32
#define SET1(x) _mm512_set1_epi32((int)(x))
#define ROTL(x, s) _mm512_rol_epi32(x, s)
#define F(b, c, d) _mm512_ternarylogic_epi32(b, c, d, 0xca)
#define G(b, c, d) _mm512_ternarylogic_epi32(b, c, d, 0xe4)
#define H(b, c, d) _mm512_ternarylogic_epi32(b, c, d, 0x96)
#define I(b, c, d) _mm512_ternarylogic_epi32(b, c, d, 0x39)

__attribute__((target("avx512f")))
static void blocks16(multi_md5_state *state, const uint8_t *base, size_t stride, size_t blocks) {
    uint32_t offsets[16];
    for (int lane = 0; lane < 16; lane++) offsets[lane] = (uint32_t)(lane * stride);
    const __m512i index = _mm512_loadu_si512(offsets);
    __m512i sa = _mm512_loadu_si512(state->words[0]), sb = _mm512_loadu_si512(state->words[1]);
    __m512i sc = _mm512_loadu_si512(state->words[2]), sd = _mm512_loadu_si512(state->words[3]);
    for (size_t block = 0; block < blocks; block++) {
        const uint8_t *at = base + block * 64;
        __m512i m[16];
        for (int j = 0; j < 16; j++) m[j] = _mm512_i32gather_epi32(index, at + 4 * j, 1);
        __m512i a = sa, b = sb, c = sc, d = sd;
        ROUNDS
        sa = ADD(sa, a); sb = ADD(sb, b); sc = ADD(sc, c); sd = ADD(sd, d);
    }
    _mm512_storeu_si512(state->words[0], sa); _mm512_storeu_si512(state->words[1], sb);
    _mm512_storeu_si512(state->words[2], sc); _mm512_storeu_si512(state->words[3], sd);
}

#undef ADD
#undef SET1
#undef ROTL
#undef F
#undef G
#undef H
#undef I

// AVX2: 8 lanes; no rotate or ternary logic, so shifts and the usual forms of F to I.
#define ADD _mm256_add_epi32
#define SET1(x) _mm256_set1_epi32((int)(x))
#define ROTL(x, s) _mm256_or_si256(_mm256_slli_epi32(x, s), _mm256_srli_epi32(x, 32 - (s)))
#define F(b, c, d) _mm256_xor_si256(d, _mm256_and_si256(b, _mm256_xor_si256(c, d)))
#define G(b, c, d) _mm256_xor_si256(c, _mm256_and_si256(d, _mm256_xor_si256(b, c)))
#define H(b, c, d) _mm256_xor_si256(_mm256_xor_si256(b, c), d)
#define I(b, c, d) _mm256_xor_si256(c, _mm256_or_si256(b, _mm256_xor_si256(d, _mm256_set1_epi32(-1))))

__attribute__((target("avx2")))
static void blocks8(multi_md5_state *state, const uint8_t *base, size_t stride, size_t blocks) {
    uint32_t offsets[8];
    for (int lane = 0; lane < 8; lane++) offsets[lane] = (uint32_t)(lane * stride);
    const __m256i index = _mm256_loadu_si256((const __m256i *)offsets);
    __m256i sa = _mm256_loadu_si256((const __m256i *)state->words[0]), sb = _mm256_loadu_si256((const __m256i *)state->words[1]);
    __m256i sc = _mm256_loadu_si256((const __m256i *)state->words[2]), sd = _mm256_loadu_si256((const __m256i *)state->words[3]);
    for (size_t block = 0; block < blocks; block++) {
        const uint8_t *at = base + block * 64;
        __m256i m[16];
        for (int j = 0; j < 16; j++) m[j] = _mm256_i32gather_epi32((const int *)(at + 4 * j), index, 1);
        __m256i a = sa, b = sb, c = sc, d = sd;
        ROUNDS
        sa = ADD(sa, a); sb = ADD(sb, b); sc = ADD(sc, c); sd = ADD(sd, d);
    }
    _mm256_storeu_si256((__m256i *)state->words[0], sa); _mm256_storeu_si256((__m256i *)state->words[1], sb);
    _mm256_storeu_si256((__m256i *)state->words[2], sc); _mm256_storeu_si256((__m256i *)state->words[3], sd);
}

int multi_md5_lanes(void) {
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f")) return 16;
    if (__builtin_cpu_supports("avx2")) return 8;
    return 0;
}

#else
// Not x86-64: no lanes; the caller hashes one string at a time.
int multi_md5_lanes(void) { return 0; }
static void blocks16(multi_md5_state *state, const uint8_t *base, size_t stride, size_t blocks) {
    (void)state, (void)base, (void)stride, (void)blocks;
}
static void blocks8(multi_md5_state *state, const uint8_t *base, size_t stride, size_t blocks) {
    (void)state, (void)base, (void)stride, (void)blocks;
}
#endif

void multi_md5_init(multi_md5_state *state, int lanes) {
    memset(state, 0, sizeof *state);
    state->lanes = lanes;
    for (int w = 0; w < 4; w++)
        for (int lane = 0; lane < MULTI_MD5_MAX_LANES; lane++) state->words[w][lane] = initial[w];
}

void multi_md5_blocks(multi_md5_state *state, const uint8_t *base, size_t stride, size_t blocks) {
    // Outside the contract (a width the CPU lacks, offsets past 32 bits): a bug of the caller's,
    // stopped here rather than run as an illegal instruction or a wrong gather.
    if (state->lanes > multi_md5_lanes() || (state->lanes != 8 && state->lanes != 16)
        || stride * (size_t)(state->lanes - 1) > 0x7fffffff) __builtin_trap();
    if (state->lanes == 16) blocks16(state, base, stride, blocks);
    else blocks8(state, base, stride, blocks);
}

void multi_md5_finish(multi_md5_state *state, uint64_t length) {
    // The same for every lane (all are `length` long): 0x80, zeros, the length in bits.
    uint8_t padding[64] = {0x80};
    uint64_t bits = length * 8;
    for (int i = 0; i < 8; i++) padding[56 + i] = (uint8_t)(bits >> (8 * i));
    multi_md5_blocks(state, padding, 0, 1);
}

void multi_md5_digest(const multi_md5_state *state, int lane, uint8_t digest[16]) {
    for (int w = 0; w < 4; w++)
        for (int i = 0; i < 4; i++) digest[4 * w + i] = (uint8_t)(state->words[w][lane] >> (8 * i));
}
