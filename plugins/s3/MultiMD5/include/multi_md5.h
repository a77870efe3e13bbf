#ifndef ORCHESTRATE_MULTI_MD5_H
#define ORCHESTRATE_MULTI_MD5_H

#include <stddef.h>
#include <stdint.h>

/// MD5 of several equally long byte strings at once, one per lane of a vector register
/// (16 lanes with AVX-512, 8 with AVX2). MD5 has no parallelism within one string and no CPU
/// instruction of its own, so one string runs at about 700 MB/s; the parts of a multipart
/// upload are independent strings of the same length, and side by side they hash several
/// times faster. Thread rule: none (no global state); the caller owns every buffer.
///
/// Use: `multi_md5_lanes()` tells how many lanes this CPU offers (0: none, hash one string at
/// a time elsewhere). Initialise a state, feed whole 64-byte blocks with `multi_md5_blocks`,
/// then the padding with `multi_md5_finish`, and read lane i's digest with `multi_md5_digest`.

#define MULTI_MD5_MAX_LANES 16

typedef struct {
    /// The four MD5 words of each lane: words[w][lane].
    uint32_t words[4][MULTI_MD5_MAX_LANES];
    /// The lanes this state hashes with: 8 or 16.
    int lanes;
} multi_md5_state;

/// The lanes the fastest implementation on this CPU hashes at once: 16, 8, or 0 when the CPU
/// has neither AVX-512F nor AVX2.
int multi_md5_lanes(void);

/// Starts `lanes` (8 or 16, at most what `multi_md5_lanes` allows) empty strings.
void multi_md5_init(multi_md5_state *state, int lanes);

/// Hashes `blocks` 64-byte blocks of every lane: lane i's bytes start at `base + i * stride`.
/// `stride * (lanes - 1)` must stay below 2 GiB (the gather's offsets are 32-bit); a state whose
/// width the CPU lacks, or a larger stride, traps. Lanes the caller does not need may point anywhere
/// readable (their digests are ignored).
void multi_md5_blocks(multi_md5_state *state, const uint8_t *base, size_t stride, size_t blocks);

/// Ends every lane's string after `length` bytes in all (a multiple of 64: each lane was fed
/// whole blocks only), by hashing MD5's padding block.
void multi_md5_finish(multi_md5_state *state, uint64_t length);

/// Lane `lane`'s 16-byte digest (after `multi_md5_finish`).
void multi_md5_digest(const multi_md5_state *state, int lane, uint8_t digest[16]);

#endif
