import CCurl
import OrchestratePluginKit

/// The header lines of an HTTP response as they arrive, names lower-cased, in arrival order, of
/// the last response only (a redirect's or a 100 Continue's are dropped when the next status
/// line comes). A server whose header never ends is cut off at `cap` (before libcurl's own
/// 300 KiB limit, with a clearer message).
public struct CurlResponseHead {
    public static let cap = 256 * 1024
    public private(set) var fields: [(name: String, value: String)] = []
    /// Bytes of the current response's header lines.
    public private(set) var bytes = 0
    /// Between a status line and the blank line that ends its headers.
    public private(set) var inHeaders = false

    public init() {}

    /// Takes one header line; false once the headers pass `cap` (stop the transfer).
    public mutating func take(_ raw: UnsafeRawBufferPointer) -> Bool {
        let line = String(decoding: raw, as: UTF8.self).trimmingWhitespace
        if line.hasPrefix("HTTP/") {
            fields = []
            bytes = 0
            inHeaders = true
        } else if line.isEmpty {
            inHeaders = false
        }
        bytes += raw.count
        guard bytes <= Self.cap else { return false }
        if let colon = line.firstIndex(of: ":") {
            fields.append((String(line[..<colon]).lowercased(), String(line[line.index(after: colon)...]).trimmingWhitespace))
        }
        return true
    }

    public mutating func reset() { self = CurlResponseHead() }

    /// The last value of the header `name` (any case).
    public func value(_ name: String) -> String? {
        let lower = name.lowercased()
        return fields.last { $0.name == lower }?.value
    }
}

/// A response body kept in memory up to `cap` bytes (an API's answer, an error page): past the
/// cap the rest is not even read, so a huge or endless body costs neither memory nor the time to
/// drain it.
public struct CappedBuffer {
    public let cap: Int
    public private(set) var bytes: [UInt8] = []
    /// The body went past `cap`: `bytes` holds its start.
    public private(set) var truncated = false

    public init(cap: Int) { self.cap = cap }

    /// Keeps what fits; false when `chunk` had to be cut (return 0 to libcurl: stop reading).
    public mutating func append(_ chunk: UnsafeRawBufferPointer) -> Bool {
        let room = max(0, cap - bytes.count)
        bytes.append(contentsOf: chunk.prefix(room))
        if chunk.count > room { truncated = true }
        return chunk.count <= room
    }

    public mutating func reset() {
        bytes = []
        truncated = false
    }
}

extension StringProtocol {
    /// Without leading and trailing spaces, tabs, CR and LF (scalar-wise: "\r\n" is one
    /// Character in Swift, so Character comparisons would miss it).
    public var trimmingWhitespace: String {
        let scalars = Array(unicodeScalars)
        func blank(_ s: Unicode.Scalar) -> Bool { s == " " || s == "\t" || s == "\r" || s == "\n" }
        guard let first = scalars.firstIndex(where: { !blank($0) }), let last = scalars.lastIndex(where: { !blank($0) }) else { return "" }
        var out = String.UnicodeScalarView()
        out.append(contentsOf: scalars[first...last])
        return String(out)
    }
}
