#if canImport(Glibc)
import Glibc
#endif

/// The keys a request is signed with. `description` never shows the secret or the token, so
/// interpolating credentials into a log line or an error cannot leak them.
public struct AWSCredentials: Sendable, Equatable, CustomStringConvertible {
    public var accessKeyID: String
    public var secretAccessKey: String
    public var sessionToken: String?
    /// Where they came from ("environment", "profile dev of ~/.aws/credentials", "inputs").
    public var source: String

    public init(accessKeyID: String, secretAccessKey: String, sessionToken: String? = nil, source: String) {
        self.accessKeyID = accessKeyID
        self.secretAccessKey = secretAccessKey
        self.sessionToken = sessionToken
        self.source = source
    }

    public var description: String { "access key \(accessKeyID) from \(source)" }
}

/// AWS Signature Version 4 for S3, written out (libcurl's CURLOPT_AWS_SIGV4 in Debian's 7.88
/// omits x-amz-content-sha256 and does not canonicalise query strings).
///
/// S3's variant: the path is percent-encoded once (no normalisation, no double encoding), every
/// request carries `x-amz-content-sha256` (a payload's SHA-256, or `UNSIGNED-PAYLOAD`), and a
/// session token travels as the signed `x-amz-security-token` header.
///
/// ```swift
/// let signer = SigV4(region: "eu-west-1")
/// let signed = signer.sign(.init(method: "GET", host: "bucket.s3.eu-west-1.amazonaws.com", path: "/my key",
///                                payloadHash: SigV4.emptyPayloadHash), credentials: credentials, time: time(nil))
/// // URL: scheme://host + signed.encodedPath + "?" + signed.encodedQuery; headers: signed.headers
/// ```
public struct SigV4: Sendable {
    public let region: String
    public let service: String

    public static let unsignedPayload = "UNSIGNED-PAYLOAD"
    /// SHA-256 of no bytes: the payload hash of a GET, HEAD or DELETE.
    public static let emptyPayloadHash = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

    public init(region: String, service: String = "s3") {
        self.region = region
        self.service = service
    }

    public struct Request: Sendable {
        public var method: String
        /// The Host header's value: the host, with `:port` when it is not the scheme's default.
        public var host: String
        /// The path, not encoded ("/bucket/a key"); the signer encodes it.
        public var path: String
        /// Query parameters, not encoded (a flag such as `uploads` has the value "").
        public var query: [(name: String, value: String)]
        /// Headers to sign and send besides the ones the signer adds (Content-MD5, Range,
        /// If-Match, x-amz-meta-*, x-amz-checksum-*...).
        public var headers: [(name: String, value: String)]
        /// Hex SHA-256 of the body, or `UNSIGNED-PAYLOAD`.
        public var payloadHash: String

        public init(method: String, host: String, path: String, query: [(name: String, value: String)] = [],
                    headers: [(name: String, value: String)] = [], payloadHash: String)
        {
            self.method = method
            self.host = host
            self.path = path
            self.query = query
            self.headers = headers
            self.payloadHash = payloadHash
        }
    }

    public struct Signed: Sendable {
        public var canonicalRequest: String
        public var stringToSign: String
        public var signature: String
        /// The headers to send, the Authorization header included (names as given, lower-case
        /// for the ones the signer adds).
        public var headers: [(name: String, value: String)]
        /// The path and query to put in the URL: exactly the encoded forms that were signed.
        public var encodedPath: String
        public var encodedQuery: String

        public var authorization: String { headers.last { $0.name == "Authorization" }?.value ?? "" }
    }

    /// Signs `request` as of `time` (seconds since the epoch, UTC).
    public func sign(_ request: Request, credentials: AWSCredentials, time: Int) -> Signed {
        let (amzDate, day) = Self.timestamps(time)
        var headers = request.headers
        headers.append(("host", request.host))
        headers.append(("x-amz-date", amzDate))
        headers.append(("x-amz-content-sha256", request.payloadHash))
        if let token = credentials.sessionToken, !token.isEmpty { headers.append(("x-amz-security-token", token)) }

        // Canonical headers: lower-case names, sorted; values trimmed with inner runs of spaces
        // collapsed; a name given twice has its values joined by commas, in order.
        var byName: [String: [String]] = [:]
        for (name, value) in headers { byName[name.lowercased(), default: []].append(Self.collapseSpaces(value)) }
        let names = byName.keys.sorted()
        let canonicalHeaders = names.map { "\($0):\(byName[$0]!.joined(separator: ","))\n" }.joined()
        let signedHeaders = names.joined(separator: ";")

        let encodedPath = request.path.isEmpty ? "/" : Self.encode(request.path, keepSlash: true)
        let encodedQuery = request.query
            .map { (Self.encode($0.name, keepSlash: false), Self.encode($0.value, keepSlash: false)) }
            .sorted { $0.0 != $1.0 ? $0.0 < $1.0 : $0.1 < $1.1 }
            .map { "\($0.0)=\($0.1)" }.joined(separator: "&")

        let canonicalRequest = [request.method.uppercased(), encodedPath, encodedQuery, canonicalHeaders, signedHeaders,
                                request.payloadHash].joined(separator: "\n")
        let scope = "\(day)/\(region)/\(service)/aws4_request"
        let stringToSign = ["AWS4-HMAC-SHA256", amzDate, scope,
                            S3Crypto.hex(S3Crypto.sha256(Array(canonicalRequest.utf8)))].joined(separator: "\n")
        let key = signingKey(secret: credentials.secretAccessKey, day: day)
        let signature = S3Crypto.hex(S3Crypto.hmacSHA256(key: key, Array(stringToSign.utf8)))
        headers.append(("Authorization",
                        "AWS4-HMAC-SHA256 Credential=\(credentials.accessKeyID)/\(scope), SignedHeaders=\(signedHeaders), Signature=\(signature)"))
        return Signed(canonicalRequest: canonicalRequest, stringToSign: stringToSign, signature: signature, headers: headers,
                      encodedPath: encodedPath, encodedQuery: encodedQuery)
    }

    /// kSigning = HMAC(HMAC(HMAC(HMAC("AWS4" + secret, day), region), service), "aws4_request").
    public func signingKey(secret: String, day: String) -> [UInt8] {
        var key = S3Crypto.hmacSHA256(key: Array("AWS4\(secret)".utf8), Array(day.utf8))
        for part in [region, service, "aws4_request"] { key = S3Crypto.hmacSHA256(key: key, Array(part.utf8)) }
        return key
    }

    /// RFC 3986 percent-encoding of UTF-8 bytes as SigV4 wants it: A-Z a-z 0-9 - _ . ~ kept,
    /// `/` kept in paths only, everything else %XX (upper-case hex; a space is %20, never +).
    public static func encode(_ text: String, keepSlash: Bool) -> String {
        let hex = Array("0123456789ABCDEF".utf8)
        var out = [UInt8]()
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "A") ... UInt8(ascii: "Z"), UInt8(ascii: "a") ... UInt8(ascii: "z"), UInt8(ascii: "0") ... UInt8(ascii: "9"),
                 UInt8(ascii: "-"), UInt8(ascii: "_"), UInt8(ascii: "."), UInt8(ascii: "~"):
                out.append(byte)
            case UInt8(ascii: "/") where keepSlash:
                out.append(byte)
            default:
                out += [UInt8(ascii: "%"), hex[Int(byte >> 4)], hex[Int(byte & 0xF)]]
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// (`YYYYMMDDTHHMMSSZ`, `YYYYMMDD`) for `time` in UTC.
    public static func timestamps(_ time: Int) -> (amzDate: String, day: String) {
        var seconds = time_t(time)
        var parts = tm()
        gmtime_r(&seconds, &parts)
        func two(_ n: Int32) -> String { n < 10 ? "0\(n)" : "\(n)" }
        let day = "\(parts.tm_year + 1900)\(two(parts.tm_mon + 1))\(two(parts.tm_mday))"
        return ("\(day)T\(two(parts.tm_hour))\(two(parts.tm_min))\(two(parts.tm_sec))Z", day)
    }

    /// Leading and trailing blanks removed, inner runs of blanks made one space.
    static func collapseSpaces(_ value: String) -> String {
        value.split(whereSeparator: { $0 == " " || $0 == "\t" || $0 == "\n" || $0 == "\r" }).joined(separator: " ")
    }
}
