import CCRC64NVME
import Testing

/// CRC-64/NVME, what s3.download verifies an object with: the folding path (carry-less
/// multiply) and the table path give, for every length and alignment, what the definition
/// gives bit by bit, and pieces fed in order, or hashed apart and combined, give the CRC of the whole.
@Suite struct CRC64Tests {
    /// The definition, one bit at a time: reflected polynomial, all-ones start and final XOR.
    static func bitwise(_ bytes: ArraySlice<UInt8>) -> UInt64 {
        var crc = UInt64.max
        for byte in bytes {
            crc ^= UInt64(byte)
            for _ in 0 ..< 8 { crc = crc & 1 == 1 ? (crc >> 1) ^ 0x9A6C_9329_AC4B_C9B5 : crc >> 1 }
        }
        return ~crc
    }

    static func fast(_ bytes: ArraySlice<UInt8>, from crc: UInt64 = 0) -> UInt64 {
        bytes.withUnsafeBytes { crc64nvme_update(crc, $0.baseAddress, $0.count) }
    }

    static func portable(_ bytes: ArraySlice<UInt8>) -> UInt64 {
        bytes.withUnsafeBytes { crc64nvme_update_portable(0, $0.baseAddress, $0.count) }
    }

    /// The catalogue's check value (CRC-64/NVME of "123456789"); nothing is 0.
    @Test func checkValues() {
        let digits = ArraySlice(Array("123456789".utf8))
        #expect(Self.fast(digits) == 0xAE8B_1486_0A79_9888)
        #expect(Self.portable(digits) == 0xAE8B_1486_0A79_9888)
        #expect(Self.bitwise(digits) == 0xAE8B_1486_0A79_9888)
        #expect(Self.fast([]) == 0)
        // Zero bytes, long enough for the folding path and a tail.
        let zeros = ArraySlice([UInt8](repeating: 0, count: 4096 + 13))
        #expect(Self.fast(zeros) == Self.bitwise(zeros))
    }

    /// Every length up to a few fold widths, at every alignment of a 16-byte load, then a few
    /// long ones: both paths equal the definition.
    @Test func bothPathsEqualTheDefinition() {
        var random = SystemRandomNumberGenerator()
        let bytes = (0 ..< 70_000).map { _ in UInt8.random(in: 0 ... 255, using: &random) }
        for length in 0 ... 300 {
            for offset in [0, 1, 7, 15] {
                let slice = bytes[offset ..< offset + length]
                let expected = Self.bitwise(slice)
                #expect(Self.fast(slice) == expected, "\(length) bytes at \(offset)")
                #expect(Self.portable(slice) == expected, "\(length) bytes at \(offset), portable")
            }
        }
        for length in [1024, 4096 + 63, 65_536, 69_999] {
            let slice = bytes[1 ..< 1 + length]
            #expect(Self.fast(slice) == Self.bitwise(slice), "\(length) bytes")
        }
    }

    /// A file hashed chunk by chunk, the chunks cut anywhere: the CRC of the whole.
    @Test func piecesInOrderGiveTheWhole() {
        var random = SystemRandomNumberGenerator()
        let bytes = (0 ..< 200_000).map { _ in UInt8.random(in: 0 ... 255, using: &random) }
        let whole = Self.bitwise(bytes[...])
        var crc: UInt64 = 0
        var at = 0
        while at < bytes.count {
            let n = min(bytes.count - at, Int.random(in: 0 ... 5000, using: &random))
            crc = Self.fast(bytes[at ..< at + n], from: crc)
            at += n
        }
        #expect(crc == whole)
    }

    /// Pieces hashed on their own, each from 0, then combined by length: the CRC of the whole,
    /// for empty pieces, pieces of one byte, and pieces longer than the fold widths.
    @Test func piecesHashedApartCombineIntoTheWhole() {
        var random = SystemRandomNumberGenerator()
        let bytes = (0 ..< 300_000).map { _ in UInt8.random(in: 0 ... 255, using: &random) }
        let whole = Self.bitwise(bytes[...])
        for maximum in [1, 100, 70_000] {
            var crc: UInt64 = 0
            var at = 0
            while at < bytes.count {
                let n = min(bytes.count - at, Int.random(in: 0 ... maximum, using: &random))
                crc = crc64nvme_combine(crc, Self.fast(bytes[at ..< at + n]), UInt64(n))
                at += n
                if maximum == 1 && at > 2000 { break }
            }
            #expect(crc == Self.bitwise(bytes[0 ..< at]), "pieces of up to \(maximum) bytes")
            if at == bytes.count { #expect(crc == whole) }
        }
        // Combining with an empty second piece changes nothing.
        let tail = bytes[10 ..< 5000]
        #expect(crc64nvme_combine(Self.fast(tail), 0, 0) == Self.fast(tail))
    }

    /// The lengths a download combines: 1 MiB chunks and ranges of several MiB, after a first
    /// piece whose CRC is not 0 (the whole, hashed in order, is the reference).
    @Test func chunksAndRangesOfMebibytesCombine() {
        var random = SystemRandomNumberGenerator()
        let first = (0 ..< (1 << 20) + 1).map { _ in UInt8.random(in: 0 ... 255, using: &random) }
        var second = [UInt8](repeating: 0, count: 3 << 20)
        for i in stride(from: 0, to: second.count, by: 4093) { second[i] = UInt8.random(in: 1 ... 255, using: &random) }
        let a = Self.fast(first[...]), b = Self.fast(second[...])
        #expect(a != 0 && b != 0)
        #expect(crc64nvme_combine(a, b, UInt64(second.count)) == Self.fast(second[...], from: a))
        #expect(crc64nvme_combine(b, a, UInt64(first.count)) == Self.fast(first[...], from: b))
        // Three ranges of 1 MiB + 1 MiB + 1 MiB combined two ways give the same.
        let third = UInt64(1 << 20)
        let x = Self.fast(second[0 ..< 1 << 20]), y = Self.fast(second[1 << 20 ..< 2 << 20]), z = Self.fast(second[2 << 20 ..< 3 << 20])
        #expect(crc64nvme_combine(crc64nvme_combine(x, y, third), z, third) == b)
        #expect(crc64nvme_combine(x, crc64nvme_combine(y, z, third), 2 * third) == b)
    }
}
