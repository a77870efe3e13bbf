// CRC-64/NVME in two methods: slicing-by-8 tables (portable), and folding with the carry-less
// multiply (PCLMULQDQ) for long inputs on x86-64, which runs at memory speed.
//
// Notation (reflected CRC): the register's bit i is the coefficient of x^(63-i); a 16-byte block
// loaded little-endian has bit j for x^(127-j). A carry-less product of two 64-bit reflected
// values, read as such a block, is x * a(x) * b(x) (its bit m is x^(126-m)), hence the "- 1" in
// the exponents of the fold constants below.

#include "crc64nvme.h"

#include <pthread.h>

/// The polynomial without its x^64 term, bits reflected.
#define POLY 0x9A6C9329AC4BC9B5ull

static uint64_t table[8][256];
static pthread_once_t tables_once = PTHREAD_ONCE_INIT;
#if defined(__x86_64__)
/// 1 when the CPU has PCLMULQDQ and SSE4.1 (set once, with the tables).
static int fast;

static int has_pclmul(void) {
    __builtin_cpu_init();
    return __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.1");
}
#endif

/// x^n mod P, reflected (x^0 is bit 63).
static uint64_t x_pow_mod(unsigned n) {
    uint64_t r = 1ull << 63;
    while (n--) r = (r & 1) ? (r >> 1) ^ POLY : r >> 1;
    return r;
}

// Fold constants: a 128-bit block moved forward by D bits is its low half times x^(D+64-1)
// plus its high half times x^(D-1), all mod P.
static uint64_t fold16_low, fold16_high;  // D = 128 (one block)
static uint64_t fold64_low, fold64_high;  // D = 512 (four blocks: four accumulators)

static void make_tables(void) {
    for (unsigned b = 0; b < 256; b++) {
        uint64_t crc = b;
        for (int k = 0; k < 8; k++) crc = (crc & 1) ? (crc >> 1) ^ POLY : crc >> 1;
        table[0][b] = crc;
    }
    for (unsigned b = 0; b < 256; b++)
        for (int t = 1; t < 8; t++) table[t][b] = (table[t - 1][b] >> 8) ^ table[0][table[t - 1][b] & 0xff];
    fold16_low = x_pow_mod(128 + 64 - 1);
    fold16_high = x_pow_mod(128 - 1);
    fold64_low = x_pow_mod(512 + 64 - 1);
    fold64_high = x_pow_mod(512 - 1);
#if defined(__x86_64__)
    fast = has_pclmul();
#endif
}

/// The raw register (no initial value or final XOR) after `length` more bytes.
static uint64_t update_tables(uint64_t reg, const uint8_t *p, size_t length) {
    for (; length >= 8; p += 8, length -= 8) {
        // The next eight bytes, first byte lowest (one load on a little-endian CPU), meet the register.
        uint64_t word = (uint64_t)p[0] | (uint64_t)p[1] << 8 | (uint64_t)p[2] << 16 | (uint64_t)p[3] << 24 |
                        (uint64_t)p[4] << 32 | (uint64_t)p[5] << 40 | (uint64_t)p[6] << 48 | (uint64_t)p[7] << 56;
        word ^= reg;
        reg = table[7][word & 0xff] ^ table[6][(word >> 8) & 0xff] ^ table[5][(word >> 16) & 0xff] ^
              table[4][(word >> 24) & 0xff] ^ table[3][(word >> 32) & 0xff] ^ table[2][(word >> 40) & 0xff] ^
              table[1][(word >> 48) & 0xff] ^ table[0][word >> 56];
    }
    while (length--) reg = table[0][(reg ^ *p++) & 0xff] ^ (reg >> 8);
    return reg;
}

uint64_t crc64nvme_update_portable(uint64_t crc, const void *data, size_t length) {
    pthread_once(&tables_once, make_tables);
    return ~update_tables(~crc, data, length);
}

#if defined(__x86_64__)
#include <immintrin.h>

__attribute__((target("pclmul,sse4.1")))
static inline __m128i fold(__m128i block, __m128i constants) {
    // constants: low half for the block's low half, high half for its high half.
    return _mm_xor_si128(_mm_clmulepi64_si128(block, constants, 0x00), _mm_clmulepi64_si128(block, constants, 0x11));
}

/// The raw register after `length` (at least 64) bytes, by folding.
__attribute__((target("pclmul,sse4.1")))
static uint64_t update_folding(uint64_t reg, const uint8_t *p, size_t length) {
    const __m128i by16 = _mm_set_epi64x((long long)fold16_high, (long long)fold16_low);
    const __m128i by64 = _mm_set_epi64x((long long)fold64_high, (long long)fold64_low);
    // Four accumulators, 64 bytes apart, so four multiplies are in flight at once; the register
    // meets the first eight bytes.
    __m128i a0 = _mm_xor_si128(_mm_loadu_si128((const __m128i *)p), _mm_cvtsi64_si128((long long)reg));
    __m128i a1 = _mm_loadu_si128((const __m128i *)(p + 16));
    __m128i a2 = _mm_loadu_si128((const __m128i *)(p + 32));
    __m128i a3 = _mm_loadu_si128((const __m128i *)(p + 48));
    p += 64;
    length -= 64;
    for (; length >= 64; p += 64, length -= 64) {
        a0 = _mm_xor_si128(fold(a0, by64), _mm_loadu_si128((const __m128i *)p));
        a1 = _mm_xor_si128(fold(a1, by64), _mm_loadu_si128((const __m128i *)(p + 16)));
        a2 = _mm_xor_si128(fold(a2, by64), _mm_loadu_si128((const __m128i *)(p + 32)));
        a3 = _mm_xor_si128(fold(a3, by64), _mm_loadu_si128((const __m128i *)(p + 48)));
    }
    // Into one block, then the remaining whole blocks.
    __m128i acc = _mm_xor_si128(fold(a0, by16), a1);
    acc = _mm_xor_si128(fold(acc, by16), a2);
    acc = _mm_xor_si128(fold(acc, by16), a3);
    for (; length >= 16; p += 16, length -= 16) acc = _mm_xor_si128(fold(acc, by16), _mm_loadu_si128((const __m128i *)p));
    // The last block is a message of 16 bytes read from a zero register; then the tail.
    uint8_t last[16];
    _mm_storeu_si128((__m128i *)last, acc);
    return update_tables(update_tables(0, last, 16), p, length);
}

#endif

uint64_t crc64nvme_update(uint64_t crc, const void *data, size_t length) {
    pthread_once(&tables_once, make_tables);
#if defined(__x86_64__)
    if (fast && length >= 64) return ~update_folding(~crc, data, length);
#endif
    return ~update_tables(~crc, data, length);
}

/// a * b mod P, both reflected (zlib's multmodp, for 64 bits).
static uint64_t multiply_mod(uint64_t a, uint64_t b) {
    uint64_t product = 0;
    for (uint64_t bit = 1ull << 63; bit; bit >>= 1) {
        if (a & bit) product ^= b;
        b = (b & 1) ? (b >> 1) ^ POLY : b >> 1;
    }
    return product;
}

uint64_t crc64nvme_combine(uint64_t crc1, uint64_t crc2, uint64_t length2) {
    // crc(A B) = crc(A) * x^(8 |B|) + crc(B): the all-ones start and end cancel out. x^(8n) by
    // squaring: `power` runs through x^8, x^16, x^32, ... mod P.
    uint64_t shift = 1ull << 63, power = x_pow_mod(8);
    for (uint64_t n = length2; n; n >>= 1) {
        if (n & 1) shift = multiply_mod(shift, power);
        power = multiply_mod(power, power);
    }
    return multiply_mod(crc1, shift) ^ crc2;
}
