#ifndef ORCHESTRATE_CRC64NVME_H
#define ORCHESTRATE_CRC64NVME_H

#include <stddef.h>
#include <stdint.h>

/// CRC-64/NVME: polynomial 0xAD93D23594C93659, bits reflected, initial value and final XOR all
/// ones; the checksum S3 calls CRC64NVME (check value of "123456789": 0xAE8B14860A799888).
/// A download verifies an object with it at several GB/s, where a SHA-256 costs half a second
/// of CPU per GiB even with the CPU's SHA instructions.
///
/// Thread rule: any thread; the first call sets up constant tables once (pthread_once). The
/// caller owns `data`.
///
/// Use: `crc = 0`, then `crc = crc64nvme_update(crc, bytes, n)` for each piece in order; the
/// result after the last piece is the CRC of all of them (as zlib's crc32()).
uint64_t crc64nvme_update(uint64_t crc, const void *data, size_t length);

/// The same with the portable table method only, never the CPU's carry-less multiply: the
/// reference the tests hold the fast path to, and the method on a CPU without PCLMULQDQ.
uint64_t crc64nvme_update_portable(uint64_t crc, const void *data, size_t length);

/// The CRC of two pieces one after the other, from the CRC of each and the second's length
/// (as zlib's crc32_combine()): pieces hashed apart, out of order or on several threads, give
/// the CRC of the whole. About 100 multiplies of 64 bits; any thread.
uint64_t crc64nvme_combine(uint64_t crc1, uint64_t crc2, uint64_t length2);

#endif
