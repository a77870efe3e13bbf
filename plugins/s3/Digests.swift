import CLibCrypto
import OrchestratePluginFiles
import OrchestratePluginKit
import OrchestrateS3Auth

/// MD5 and SHA-256 of the same bytes in one pass: a part's ETag check and signed payload hash,
/// a whole file's ETag check and end-to-end SHA-256. The MD5 (the slower of the two) can be
/// left out when nothing will compare it.
final class Digests {
    private let md5: OpaquePointer?
    private let sha = EVP_MD_CTX_new()

    init(md5 withMD5: Bool = true) {
        md5 = withMD5 ? EVP_MD_CTX_new() : nil
        if let md5 { EVP_DigestInit_ex(md5, EVP_md5(), nil) }
        EVP_DigestInit_ex(sha, EVP_sha256(), nil)
    }

    deinit {
        EVP_MD_CTX_free(md5)
        EVP_MD_CTX_free(sha)
    }

    func update(_ bytes: UnsafeRawBufferPointer) {
        guard let base = bytes.baseAddress, !bytes.isEmpty else { return }
        if let md5 { EVP_DigestUpdate(md5, base, bytes.count) }
        EVP_DigestUpdate(sha, base, bytes.count)
    }

    /// (MD5, SHA-256) as raw bytes (the MD5 empty when left out). Call once.
    func finish() -> (md5: [UInt8], sha256: [UInt8]) {
        func final(_ context: OpaquePointer?) -> [UInt8] {
            guard context != nil else { return [] }
            var out = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
            var length: UInt32 = 0
            EVP_DigestFinal_ex(context, &out, &length)
            return Array(out.prefix(Int(length)))
        }
        return (final(md5), final(sha))
    }

    /// The digests of `length` bytes of `file` from `offset`, streamed; a file shorter than
    /// that is an error (it changed).
    static func of(_ file: LocalFile, offset: Int64, length: Int64, step: StepContext) throws(StepError) -> (md5: [UInt8], sha256: [UInt8]) {
        let digests = Digests()
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
