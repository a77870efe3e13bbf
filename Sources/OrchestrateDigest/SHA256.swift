import CLibCrypto

/// Incremental SHA-256 over OpenSSL's EVP interface (hardware-accelerated where the CPU has
/// SHA extensions, which is why this is not hand-written), shared by the plugins that hash what
/// they move (fs, http, sftp).
///
/// ```swift
/// let hash = SHA256()
/// buffer.withUnsafeBytes { hash.update($0) }
/// let hex = hash.finish()      // "e3b0c442…"
/// ```
public final class SHA256: @unchecked Sendable {
    private let context: OpaquePointer

    public init() {
        context = EVP_MD_CTX_new()
        EVP_DigestInit_ex(context, EVP_sha256(), nil)
    }

    deinit { EVP_MD_CTX_free(context) }

    public func update(_ bytes: UnsafeRawBufferPointer) {
        if let base = bytes.baseAddress, !bytes.isEmpty { EVP_DigestUpdate(context, base, bytes.count) }
    }

    /// The digest as lower-case hex. Call once.
    public func finish() -> String {
        var digest = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
        var length: UInt32 = 0
        EVP_DigestFinal_ex(context, &digest, &length)
        let hex: [UInt8] = Array("0123456789abcdef".utf8)
        var text = [UInt8]()
        text.reserveCapacity(Int(length) * 2)
        for byte in digest.prefix(Int(length)) {
            text.append(hex[Int(byte >> 4)])
            text.append(hex[Int(byte & 0xF)])
        }
        return String(decoding: text, as: UTF8.self)
    }
}
