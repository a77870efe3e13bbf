import OrchestratePluginKit

/// ListObjectsV2, page by page (`max-keys`, continuation tokens), keys asked URL-encoded
/// (`encoding-type=url`: a key may hold characters XML 1.0 cannot carry) and decoded when the
/// server says it encoded them.
enum ObjectListing {
    struct Object {
        var key: String
        var size: Int64
        var etag: String
    }

    /// Calls `page` with each page's objects under `prefix`, in the server's (UTF-8 binary) order.
    ///
    /// A server that pages without end is stopped: a continuation token handed back unchanged
    /// (the same page again, forever), or `emptyPagesAllowed` truncated pages in a row without a
    /// key, fail with `s3_protocol`; how many keys a caller keeps is its own bound
    /// (`ListingBounds`).
    static func each(_ client: S3Client, prefix: String, pageSize: Int, _ page: ([Object]) throws(StepError) -> Void) throws(StepError) {
        var token: String?
        var emptyPages = 0
        let label = "ListObjectsV2 \(client.uri(prefix))"
        repeat {
            var query: [(name: String, value: String)] = [("list-type", "2"), ("max-keys", "\(pageSize)"), ("encoding-type", "url")]
            if !prefix.isEmpty { query.append(("prefix", prefix)) }
            if let token { query.append(("continuation-token", token)) }
            let body = try client.send("GET", key: nil, query: query, label: label, accept: [200]).bodyText
            let encoded = XML.value("EncodingType", in: body) == "url"
            var objects: [Object] = []
            for entry in XML.elements("Contents", in: body) {
                guard let raw = XML.value("Key", in: entry), let size = XML.value("Size", in: entry).flatMap({ Int64($0) }) else {
                    throw .retryable("\(label): an entry without Key or Size", code: "s3_protocol")
                }
                guard let key = encoded ? percentDecoded(raw) : raw else {
                    throw .retryable("\(label): the key \(raw) is not valid URL encoding of UTF-8", code: "s3_protocol")
                }
                objects.append(Object(key: key, size: size, etag: ETag.unquoted(XML.value("ETag", in: entry) ?? "")))
            }
            try page(objects)
            let sent = token
            token = nil
            if XML.value("IsTruncated", in: body) == "true" {
                guard let next = XML.value("NextContinuationToken", in: body), !next.isEmpty else {
                    throw .retryable("\(label): a truncated page without NextContinuationToken", code: "s3_protocol")
                }
                guard next != sent else {
                    throw .permanent("\(label): the server handed back the continuation token it was sent (the same page without end)",
                                     code: "s3_protocol")
                }
                emptyPages = objects.isEmpty ? emptyPages + 1 : 0
                guard emptyPages < emptyPagesAllowed else {
                    throw .permanent("\(label): \(emptyPagesAllowed) truncated pages in a row without a key (a listing without end)",
                                     code: "s3_protocol")
                }
                token = next
            }
        } while token != nil
    }

    static let emptyPagesAllowed = 100

    /// `%XX` decoded and `+` a space, as form encoding has it (AWS and rclone write a space as
    /// `+`, moto as `%20`; all write `+` itself as `%2B`); nil for bad escapes or bytes that are
    /// not UTF-8.
    static func percentDecoded(_ text: String) -> String? {
        var bytes: [UInt8] = []
        var iterator = text.utf8.makeIterator()
        func hex(_ c: UInt8?) -> UInt8? {
            guard let c else { return nil }
            switch c {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): return c - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): return c - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): return c - UInt8(ascii: "A") + 10
            default: return nil
            }
        }
        while let byte = iterator.next() {
            if byte == UInt8(ascii: "%") {
                guard let high = hex(iterator.next()), let low = hex(iterator.next()) else { return nil }
                bytes.append(high << 4 | low)
            } else {
                bytes.append(byte == UInt8(ascii: "+") ? UInt8(ascii: " ") : byte)
            }
        }
        return String(validating: bytes, as: UTF8.self)
    }
}
