import CLibCrypto

/// The digests and encodings S3 needs, over OpenSSL's EVP interface (libcrypto, already linked
/// for SHA-256): SHA-256 and HMAC-SHA256 for Signature Version 4, MD5 for Content-MD5, hex and
/// base64 for the headers that carry them.
public enum S3Crypto {
    public static func sha256(_ bytes: [UInt8]) -> [UInt8] { digest(EVP_sha256(), bytes) }

    public static func md5(_ bytes: UnsafeRawBufferPointer) -> [UInt8] {
        let context = EVP_MD_CTX_new()
        defer { EVP_MD_CTX_free(context) }
        EVP_DigestInit_ex(context, EVP_md5(), nil)
        if let base = bytes.baseAddress, !bytes.isEmpty { EVP_DigestUpdate(context, base, bytes.count) }
        return finish(context)
    }

    /// HMAC-SHA256 (RFC 2104) from two SHA-256 digests: no extra OpenSSL header needed.
    public static func hmacSHA256(key: [UInt8], _ message: [UInt8]) -> [UInt8] {
        var k = key.count > 64 ? sha256(key) : key
        k += [UInt8](repeating: 0, count: 64 - k.count)
        let inner = sha256(k.map { $0 ^ 0x36 } + message)
        return sha256(k.map { $0 ^ 0x5c } + inner)
    }

    public static func hex(_ bytes: [UInt8]) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var out = [UInt8]()
        out.reserveCapacity(bytes.count * 2)
        for byte in bytes {
            out.append(digits[Int(byte >> 4)])
            out.append(digits[Int(byte & 0xF)])
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// Bytes from lower- or upper-case hex; nil when it is not hex.
    public static func unhex(_ text: String) -> [UInt8]? {
        let chars = Array(text.utf8)
        guard chars.count % 2 == 0 else { return nil }
        func value(_ c: UInt8) -> UInt8? {
            switch c {
            case UInt8(ascii: "0") ... UInt8(ascii: "9"): c - UInt8(ascii: "0")
            case UInt8(ascii: "a") ... UInt8(ascii: "f"): c - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A") ... UInt8(ascii: "F"): c - UInt8(ascii: "A") + 10
            default: nil
            }
        }
        var out = [UInt8]()
        var i = 0
        while i < chars.count {
            guard let high = value(chars[i]), let low = value(chars[i + 1]) else { return nil }
            out.append(high << 4 | low)
            i += 2
        }
        return out
    }

    /// Standard base64 with padding (EVP_EncodeBlock).
    public static func base64(_ bytes: [UInt8]) -> String {
        var out = [UInt8](repeating: 0, count: (bytes.count + 2) / 3 * 4 + 1)
        let n = bytes.withUnsafeBufferPointer { source in
            out.withUnsafeMutableBufferPointer { EVP_EncodeBlock($0.baseAddress, source.baseAddress, Int32(bytes.count)) }
        }
        return String(decoding: out.prefix(Int(max(0, n))), as: UTF8.self)
    }

    private static func digest(_ md: OpaquePointer?, _ bytes: [UInt8]) -> [UInt8] {
        let context = EVP_MD_CTX_new()
        defer { EVP_MD_CTX_free(context) }
        EVP_DigestInit_ex(context, md, nil)
        bytes.withUnsafeBytes { _ = EVP_DigestUpdate(context, $0.baseAddress, $0.count) }
        return finish(context)
    }

    private static func finish(_ context: OpaquePointer?) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
        var length: UInt32 = 0
        EVP_DigestFinal_ex(context, &out, &length)
        return Array(out.prefix(Int(length)))
    }
}
