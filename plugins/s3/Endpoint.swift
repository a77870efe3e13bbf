import OrchestratePluginKit

/// Where requests go: AWS's regional endpoint or an S3-compatible service's, the bucket in the
/// host name (virtual-hosted) or in the path (path-style).
struct Endpoint {
    enum AddressingStyle: String, CaseIterable, InputEnum { case auto, path, virtual }

    let scheme: String
    /// host[:port], the port only when it is not the scheme's default.
    let authority: String
    let pathStyle: Bool

    /// For messages: scheme://authority.
    var display: String { "\(scheme)://\(authority)" }

    init(_ endpoint: String?, region: String, style: AddressingStyle, bucket: String) throws(StepError) {
        if let endpoint {
            let parts = endpoint.split(separator: "://", maxSplits: 1)
            guard parts.count == 2, parts[0] == "http" || parts[0] == "https" else {
                throw .invalidInput("endpoint \(endpoint): only http:// and https:// endpoints are supported", code: "bad_endpoint")
            }
            var rest = String(parts[1])
            while rest.hasSuffix("/") { rest.removeLast() }
            guard !rest.isEmpty, !rest.contains("/"), !rest.contains("@"), !rest.contains("?"), !rest.contains("#"),
                  rest.unicodeScalars.allSatisfy({ $0.isASCII && $0.value > 32 && $0 != "\\" })
            else {
                throw .invalidInput("endpoint \(endpoint): give scheme://host[:port] only (no path, user or query)", code: "bad_endpoint")
            }
            scheme = String(parts[0])
            let defaultPort = scheme == "https" ? ":443" : ":80"
            // libcurl sends no default port in Host: neither may the signature.
            authority = rest.hasSuffix(defaultPort) ? String(rest.dropLast(defaultPort.count)) : rest
            pathStyle = style != .virtual
        } else {
            guard !region.isEmpty, region.unicodeScalars.allSatisfy({ ($0 >= "a" && $0 <= "z") || ($0 >= "0" && $0 <= "9") || $0 == "-" }) else {
                throw .invalidInput("region \(region) is not a region name (like eu-west-1)", code: "bad_region")
            }
            scheme = "https"
            authority = "s3.\(region).amazonaws.com"
            // A bucket with dots would not match the *.s3 certificate as a host name.
            pathStyle = style == .path || (style == .auto && !Self.isVirtualHostable(bucket))
        }
        if style == .virtual && !Self.isVirtualHostable(bucket) {
            throw .invalidInput("bucket \(bucket) cannot be a host name (dots, capitals or underscores): use addressing_style: path",
                                code: "bad_bucket")
        }
    }

    /// The Host header and the path (not encoded) of `key` in `bucket` (nil key: the bucket).
    func location(bucket: String, key: String?) -> (host: String, path: String) {
        if pathStyle { return (authority, "/\(bucket)" + (key.map { "/\($0)" } ?? "")) }
        return ("\(bucket).\(authority)", "/" + (key ?? ""))
    }

    /// Bucket names that can never be safe in a host or a path are refused before any request.
    static func checkBucket(_ bucket: String) throws(StepError) {
        let allowed = bucket.unicodeScalars.allSatisfy {
            ($0 >= "a" && $0 <= "z") || ($0 >= "A" && $0 <= "Z") || ($0 >= "0" && $0 <= "9") || $0 == "-" || $0 == "." || $0 == "_"
        }
        guard allowed, (1 ... 255).contains(bucket.utf8.count), bucket != ".", bucket != ".." else {
            throw .invalidInput("bucket \(bucket): a bucket name has only letters, digits, '-', '.' and '_' (a key goes in key:)",
                                code: "bad_bucket")
        }
    }

    static func isVirtualHostable(_ bucket: String) -> Bool {
        (3 ... 63).contains(bucket.utf8.count) && !bucket.hasPrefix("-") && !bucket.hasSuffix("-")
            && bucket.unicodeScalars.allSatisfy { ($0 >= "a" && $0 <= "z") || ($0 >= "0" && $0 <= "9") || $0 == "-" }
    }
}
