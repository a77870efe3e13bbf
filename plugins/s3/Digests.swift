import CCRC64NVME
import CLibCrypto
import OrchestratePluginFiles
import OrchestratePluginKit
import OrchestrateS3Auth

/// The digests of the same bytes in one pass, each only when asked: MD5 (a part's or a single
/// PUT's ETag check; the slowest), SHA-256 (a signed payload, the `x-amz-meta-sha256` end-to-end
/// check), CRC-64/NVME (what a download verifies with: 15 GB/s, where SHA-256 costs half a second
/// of CPU per GiB even with the CPU's SHA instructions).
final class Digests {
    /// The results; a digest not asked for is empty (or 0).
    struct Sums {
        var md5: [UInt8] = []
        var sha256: [UInt8] = []
        var crc64: UInt64 = 0
    }

    private let md5: OpaquePointer?
    private let sha: OpaquePointer?
    private let withCRC: Bool
    private var crc: UInt64 = 0

    init(md5 withMD5: Bool = true, sha256 withSHA: Bool = true, crc64: Bool = false) {
        md5 = withMD5 ? EVP_MD_CTX_new() : nil
        sha = withSHA ? EVP_MD_CTX_new() : nil
        withCRC = crc64
        if let md5 { EVP_DigestInit_ex(md5, EVP_md5(), nil) }
        if let sha { EVP_DigestInit_ex(sha, EVP_sha256(), nil) }
    }

    deinit {
        EVP_MD_CTX_free(md5)
        EVP_MD_CTX_free(sha)
    }

    func update(_ bytes: UnsafeRawBufferPointer) {
        guard let base = bytes.baseAddress, !bytes.isEmpty else { return }
        if let md5 { EVP_DigestUpdate(md5, base, bytes.count) }
        if let sha { EVP_DigestUpdate(sha, base, bytes.count) }
        if withCRC { crc = crc64nvme_update(crc, base, bytes.count) }
    }

    /// The digests asked for. Call once.
    func finish() -> Sums {
        func final(_ context: OpaquePointer?) -> [UInt8] {
            guard context != nil else { return [] }
            var out = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
            var length: UInt32 = 0
            EVP_DigestFinal_ex(context, &out, &length)
            return Array(out.prefix(Int(length)))
        }
        return Sums(md5: final(md5), sha256: final(sha), crc64: crc)
    }

    /// All three digests of `length` bytes of `file` from `offset`, streamed; a file shorter
    /// than that is an error (it changed).
    static func of(_ file: LocalFile, offset: Int64, length: Int64, md5: Bool = true, step: StepContext) throws(StepError) -> Sums {
        let digests = Digests(md5: md5, sha256: true, crc64: true)
        let end = try file.readChunks(from: offset, to: offset + length) { bytes, _ throws(StepError) in
            try step.checkCancellation()
            digests.update(bytes)
        }
        guard end == offset + length else {
            throw .permanent("\(file.path) shrank while it was read (\(end) of \(offset + length) bytes)", code: "file_changed")
        }
        return digests.finish()
    }
}

/// A CRC-64/NVME as the object's metadata carries it (`x-amz-meta-crc64nvme`, written by
/// s3.upload): 16 lower-case hex digits; as S3's own checksum header carries it
/// (`x-amz-checksum-crc64nvme`): the 8 bytes big-endian, base64.
enum CRC64Text {
    static func hex(_ crc: UInt64) -> String {
        let digits = String(crc, radix: 16)
        return String(repeating: "0", count: 16 - digits.count) + digits
    }

    /// Exactly 16 hex digits (no sign, no space), either case.
    static func parseHex(_ text: String) -> UInt64? {
        let digits = Array(text.utf8)
        guard digits.count == 16, digits.allSatisfy({ $0 < 128 && Character(Unicode.Scalar($0)).isHexDigit }) else { return nil }
        return UInt64(text, radix: 16)
    }

    /// S3's base64 form; nil for anything that is not exactly 8 bytes (a composite `…-N` value,
    /// or a server that stored a 4-byte CRC-32 under this name).
    static func parseBase64(_ text: String) -> UInt64? {
        // 8 bytes are 11 base64 digits of 6 bits (the last one's low 2 bits zero) and one "=".
        let chars = Array(text.utf8)
        guard chars.count == 12, chars[11] == UInt8(ascii: "=") else { return nil }
        var bits: UInt64 = 0
        for (i, c) in chars[0 ..< 11].enumerated() {
            let value: UInt64
            switch c {
            case UInt8(ascii: "A") ... UInt8(ascii: "Z"): value = UInt64(c - UInt8(ascii: "A"))
            case UInt8(ascii: "a") ... UInt8(ascii: "z"): value = UInt64(c - UInt8(ascii: "a")) + 26
            case UInt8(ascii: "0") ... UInt8(ascii: "9"): value = UInt64(c - UInt8(ascii: "0")) + 52
            case UInt8(ascii: "+"): value = 62
            case UInt8(ascii: "/"): value = 63
            default: return nil
            }
            if i < 10 {
                bits = bits << 6 | value
            } else {
                guard value & 3 == 0 else { return nil }
                bits = bits << 4 | value >> 2
            }
        }
        return bits
    }
}

/// S3's ETags: the MD5 of a single-PUT object, `md5(md5(part 1) ‖ … ‖ md5(part N))-N` of a
/// multipart one (not for objects encrypted with KMS keys, whose ETags are not digests).
enum ETag {
    static func unquoted(_ etag: String) -> String {
        var text = Substring(etag)
        if text.hasPrefix("W/") { text = text.dropFirst(2) }
        if text.hasPrefix("\""), text.hasSuffix("\""), text.count >= 2 { text = text.dropFirst().dropLast() }
        return String(text)
    }

    static func multipart(_ partMD5s: [[UInt8]]) -> String {
        let joined = partMD5s.flatMap { $0 }
        return S3Crypto.hex(joined.withUnsafeBytes { S3Crypto.md5($0) }) + "-\(partMD5s.count)"
    }

    /// True when `etag` is a plain MD5 (32 hex digits).
    static func isMD5(_ etag: String) -> Bool { etag.utf8.count == 32 && S3Crypto.unhex(etag) != nil }
}
