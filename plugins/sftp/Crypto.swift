import CLibCrypto

/// The few digests the SSH layer needs, over OpenSSL's EVP interface: SHA-256 for host-key
/// fingerprints, HMAC-SHA1 for hashed known_hosts entries (`|1|salt|hmac`). (File contents are
/// hashed by OrchestratePluginFiles.)
enum Digest {
    static func sha256(_ bytes: [UInt8]) -> [UInt8] { digest(EVP_sha256(), bytes) }

    static func sha1(_ bytes: [UInt8]) -> [UInt8] { digest(EVP_sha1(), bytes) }

    /// HMAC-SHA1 built from two SHA-1 digests (RFC 2104), so no extra OpenSSL header is needed.
    static func hmacSHA1(key: [UInt8], message: [UInt8]) -> [UInt8] {
        var k = key.count > 64 ? sha1(key) : key
        k += [UInt8](repeating: 0, count: 64 - k.count)
        let inner = sha1(k.map { $0 ^ 0x36 } + message)
        return sha1(k.map { $0 ^ 0x5c } + inner)
    }

    private static func digest(_ md: OpaquePointer?, _ bytes: [UInt8]) -> [UInt8] {
        let context = EVP_MD_CTX_new()
        defer { EVP_MD_CTX_free(context) }
        EVP_DigestInit_ex(context, md, nil)
        bytes.withUnsafeBytes { _ = EVP_DigestUpdate(context, $0.baseAddress, $0.count) }
        var out = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
        var length: UInt32 = 0
        EVP_DigestFinal_ex(context, &out, &length)
        return Array(out.prefix(Int(length)))
    }
}

/// Standard base64 (RFC 4648), as known_hosts and fingerprints use it.
enum Base64 {
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)

    static func encode(_ bytes: [UInt8], padding: Bool = true) -> String {
        var out = [UInt8]()
        var i = 0
        while i < bytes.count {
            let n = min(3, bytes.count - i)
            let b0 = UInt32(bytes[i]), b1 = n > 1 ? UInt32(bytes[i + 1]) : 0, b2 = n > 2 ? UInt32(bytes[i + 2]) : 0
            let v = b0 << 16 | b1 << 8 | b2
            out.append(alphabet[Int(v >> 18 & 63)])
            out.append(alphabet[Int(v >> 12 & 63)])
            if n > 1 { out.append(alphabet[Int(v >> 6 & 63)]) } else if padding { out.append(UInt8(ascii: "=")) }
            if n > 2 { out.append(alphabet[Int(v & 63)]) } else if padding { out.append(UInt8(ascii: "=")) }
            i += 3
        }
        return String(decoding: out, as: UTF8.self)
    }

    static func decode(_ text: Substring) -> [UInt8]? {
        var table = [Int](repeating: -1, count: 256)
        for (i, c) in alphabet.enumerated() { table[Int(c)] = i }
        var out = [UInt8](), acc: UInt32 = 0, bits = 0
        for c in text.utf8 {
            if c == UInt8(ascii: "=") { break }
            let v = table[Int(c)]
            if v < 0 { return nil }
            acc = acc << 6 | UInt32(v)
            bits += 6
            if bits >= 8 { bits -= 8; out.append(UInt8(acc >> UInt32(bits) & 0xFF)) }
        }
        return out
    }
}
