// Reading and writing JSON text (RFC 8259). Hand-written so integers stay exact, keys come out
// sorted (stable output for the store and for tests), and no Foundation bridging is involved.

public struct JSONParseError: Error, CustomStringConvertible, Sendable {
    public let offset: Int
    public let message: String
    public var description: String { "invalid JSON at byte \(offset): \(message)" }
}

extension JSONValue {
    /// Parses a complete JSON text. Nesting deeper than `maxDepth` is refused, so hostile input
    /// cannot exhaust the stack.
    public init(parsing text: String, maxDepth: Int = 256) throws {
        var copy = text
        self = try copy.withUTF8 { buffer in
            var parser = Parser(bytes: buffer, maxDepth: maxDepth)
            let value = try parser.parseValue(depth: 0)
            parser.skipWhitespace()
            guard parser.index == buffer.count else { throw parser.error("unexpected text after the value") }
            return value
        }
    }

    /// Parses JSON from raw bytes (UTF-8).
    public init(parsing bytes: [UInt8], maxDepth: Int = 256) throws {
        self = try bytes.withUnsafeBufferPointer { buffer in
            var parser = Parser(bytes: buffer, maxDepth: maxDepth)
            let value = try parser.parseValue(depth: 0)
            parser.skipWhitespace()
            guard parser.index == buffer.count else { throw parser.error("unexpected text after the value") }
            return value
        }
    }

    /// Compact JSON text with object keys sorted.
    public var jsonText: String { String(decoding: jsonBytes, as: UTF8.self) }

    /// `jsonText` as UTF-8 bytes, for writing to a socket without making a String first (the
    /// HTTP API's answers).
    public var jsonBytes: [UInt8] {
        var writer = JSONWriter(pretty: false)
        writer.write(self, indent: 0)
        return writer.bytes
    }

    /// Indented JSON text with object keys sorted, for people.
    public var prettyJSONText: String {
        var writer = JSONWriter(pretty: true)
        writer.write(self, indent: 0)
        return String(decoding: writer.bytes, as: UTF8.self)
    }
}

/// Writes JSON text into a byte array. A string is copied in runs of bytes that need no escape
/// (most strings are one run), not scalar by scalar: run details of a few hundred steps are
/// what the HTTP API sends most (bench/api).
struct JSONWriter {
    let pretty: Bool
    var bytes: [UInt8] = []

    init(pretty: Bool, capacity: Int = 256) {
        self.pretty = pretty
        if capacity > 0 { bytes.reserveCapacity(capacity) }
    }

    mutating func write(_ value: JSONValue, indent: Int) {
        switch value {
        case .null: append("null")
        case .bool(let b): append(b ? "true" : "false")
        case .int(let i): writeInteger(i)
        case .double(let d):
            if d.isNaN || d.isInfinite { append("null") }
            else if d.rounded() == d && abs(d) < 1e15 { writeInteger(Int64(d)); append(".0") }
            else { append(text: d.description) }
        case .string(let s): writeString(s)
        case .array(let a):
            if a.isEmpty { append("[]"); return }
            bytes.append(UInt8(ascii: "["))
            for (i, v) in a.enumerated() {
                if i > 0 { bytes.append(UInt8(ascii: ",")) }
                newline(indent + 1)
                write(v, indent: indent + 1)
            }
            newline(indent)
            bytes.append(UInt8(ascii: "]"))
        case .object(let o):
            if o.isEmpty { append("{}"); return }
            bytes.append(UInt8(ascii: "{"))
            for (i, member) in o.sorted(by: { $0.key < $1.key }).enumerated() {
                if i > 0 { bytes.append(UInt8(ascii: ",")) }
                newline(indent + 1)
                writeString(member.key)
                append(pretty ? ": " : ":")
                write(member.value, indent: indent + 1)
            }
            newline(indent)
            bytes.append(UInt8(ascii: "}"))
        }
    }

    private mutating func newline(_ indent: Int) {
        guard pretty else { return }
        bytes.append(UInt8(ascii: "\n"))
        bytes.append(contentsOf: repeatElement(UInt8(ascii: " "), count: 2 * indent))
    }

    private mutating func append(_ text: StaticString) {
        text.withUTF8Buffer { bytes.append(contentsOf: $0) }
    }

    private mutating func append(text: String) {
        bytes.append(contentsOf: text.utf8)
    }

    private mutating func writeInteger(_ value: Int64) {
        guard value < 0 || value > 9 else { bytes.append(UInt8(ascii: "0") + UInt8(value)); return }
        append(text: String(value))
    }

    /// A JSON string: `"` and `\\` escaped, \n \r \t by name, other control characters as
    /// \u00XX; everything else (non-ASCII included) as its UTF-8 bytes.
    mutating func writeString(_ string: String) {
        bytes.append(UInt8(ascii: "\""))
        var string = string
        string.withUTF8 { utf8 in
            var runStart = 0
            for i in 0..<utf8.count {
                let byte = utf8[i]
                guard byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") else { continue }
                bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[runStart..<i]))
                runStart = i + 1
                switch byte {
                case UInt8(ascii: "\""): append("\\\"")
                case UInt8(ascii: "\\"): append("\\\\")
                case UInt8(ascii: "\n"): append("\\n")
                case UInt8(ascii: "\r"): append("\\r")
                case UInt8(ascii: "\t"): append("\\t")
                default:
                    let hex: [UInt8] = Array("0123456789abcdef".utf8)
                    bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0"),
                                              hex[Int(byte >> 4)], hex[Int(byte & 15)]])
                }
            }
            bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[runStart...]))
        }
        bytes.append(UInt8(ascii: "\""))
    }
}

private struct Parser {
    let bytes: UnsafeBufferPointer<UInt8>
    let maxDepth: Int
    var index = 0

    init(bytes: UnsafeBufferPointer<UInt8>, maxDepth: Int) {
        self.bytes = bytes
        self.maxDepth = maxDepth
    }

    func error(_ message: String) -> JSONParseError { JSONParseError(offset: index, message: message) }

    mutating func skipWhitespace() {
        while index < bytes.count, [0x20, 0x0A, 0x0D, 0x09].contains(bytes[index]) { index += 1 }
    }

    mutating func parseValue(depth: Int) throws -> JSONValue {
        guard depth < maxDepth else { throw error("nesting deeper than \(maxDepth)") }
        skipWhitespace()
        guard index < bytes.count else { throw error("unexpected end of input") }
        switch bytes[index] {
        case UInt8(ascii: "{"): return try parseObject(depth: depth)
        case UInt8(ascii: "["): return try parseArray(depth: depth)
        case UInt8(ascii: "\""): return .string(try parseString())
        case UInt8(ascii: "t"): try expect("true"); return .bool(true)
        case UInt8(ascii: "f"): try expect("false"); return .bool(false)
        case UInt8(ascii: "n"): try expect("null"); return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return try parseNumber()
        default: throw error("unexpected character")
        }
    }

    mutating func expect(_ word: String) throws {
        for byte in word.utf8 {
            guard index < bytes.count, bytes[index] == byte else { throw error("expected '\(word)'") }
            index += 1
        }
    }

    mutating func parseObject(depth: Int) throws -> JSONValue {
        index += 1
        var object: [String: JSONValue] = [:]
        skipWhitespace()
        if index < bytes.count, bytes[index] == UInt8(ascii: "}") { index += 1; return .object(object) }
        while true {
            skipWhitespace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else { throw error("expected a string key") }
            let key = try parseString()
            skipWhitespace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else { throw error("expected ':'") }
            index += 1
            object[key] = try parseValue(depth: depth + 1)
            skipWhitespace()
            guard index < bytes.count else { throw error("unexpected end of input in object") }
            if bytes[index] == UInt8(ascii: ",") { index += 1; continue }
            if bytes[index] == UInt8(ascii: "}") { index += 1; return .object(object) }
            throw error("expected ',' or '}'")
        }
    }

    mutating func parseArray(depth: Int) throws -> JSONValue {
        index += 1
        var array: [JSONValue] = []
        skipWhitespace()
        if index < bytes.count, bytes[index] == UInt8(ascii: "]") { index += 1; return .array(array) }
        while true {
            array.append(try parseValue(depth: depth + 1))
            skipWhitespace()
            guard index < bytes.count else { throw error("unexpected end of input in array") }
            if bytes[index] == UInt8(ascii: ",") { index += 1; continue }
            if bytes[index] == UInt8(ascii: "]") { index += 1; return .array(array) }
            throw error("expected ',' or ']'")
        }
    }

    mutating func parseString() throws -> String {
        index += 1
        // Runs of unescaped bytes are validated and appended whole; a string without escapes
        // (most of them) is its one run, made in one step.
        var scalars = String.UnicodeScalarView()
        var runStart = index
        var sawEscape = false
        func run(_ end: Int) throws -> String {
            guard let s = String(validating: UnsafeBufferPointer(rebasing: bytes[runStart..<end]), as: UTF8.self)
            else { throw error("invalid UTF-8 in string") }
            return s
        }
        func flushRun(_ end: Int, into scalars: inout String.UnicodeScalarView) throws {
            if end > runStart { scalars.append(contentsOf: try run(end).unicodeScalars) }
        }
        while index < bytes.count {
            let byte = bytes[index]
            if byte == UInt8(ascii: "\"") {
                if !sawEscape {
                    let whole = try run(index)
                    index += 1
                    return whole
                }
                try flushRun(index, into: &scalars)
                index += 1
                return String(scalars)
            }
            if byte < 0x20 { throw error("control character in string") }
            if byte == UInt8(ascii: "\\") {
                sawEscape = true
                try flushRun(index, into: &scalars)
                index += 1
                guard index < bytes.count else { break }
                let escaped = bytes[index]
                index += 1
                switch escaped {
                case UInt8(ascii: "\""): scalars.append("\"")
                case UInt8(ascii: "\\"): scalars.append("\\")
                case UInt8(ascii: "/"): scalars.append("/")
                case UInt8(ascii: "b"): scalars.append("\u{08}")
                case UInt8(ascii: "f"): scalars.append("\u{0C}")
                case UInt8(ascii: "n"): scalars.append("\n")
                case UInt8(ascii: "r"): scalars.append("\r")
                case UInt8(ascii: "t"): scalars.append("\t")
                case UInt8(ascii: "u"):
                    var code = try parseHex4()
                    if (0xD800...0xDBFF).contains(code) {
                        guard index + 1 < bytes.count, bytes[index] == UInt8(ascii: "\\"), bytes[index + 1] == UInt8(ascii: "u")
                        else { throw error("unpaired surrogate") }
                        index += 2
                        let low = try parseHex4()
                        guard (0xDC00...0xDFFF).contains(low) else { throw error("invalid surrogate pair") }
                        code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00)
                    }
                    guard let scalar = Unicode.Scalar(code) else { throw error("invalid \\u escape") }
                    scalars.append(scalar)
                default: throw error("invalid escape")
                }
                runStart = index
                continue
            }
            index += 1
        }
        throw error("unterminated string")
    }

    mutating func parseHex4() throws -> UInt32 {
        guard index + 4 <= bytes.count else { throw error("short \\u escape") }
        var value: UInt32 = 0
        for _ in 0..<4 {
            let b = bytes[index]
            let digit: UInt32
            switch b {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = UInt32(b - UInt8(ascii: "0"))
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = UInt32(b - UInt8(ascii: "a") + 10)
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = UInt32(b - UInt8(ascii: "A") + 10)
            default: throw error("invalid hex digit")
            }
            value = value * 16 + digit
            index += 1
        }
        return value
    }

    mutating func parseNumber() throws -> JSONValue {
        let start = index
        var isInteger = true
        if bytes[index] == UInt8(ascii: "-") { index += 1 }
        guard index < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[index]) else {
            throw error("expected a digit")
        }
        while index < bytes.count {
            let b = bytes[index]
            if (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(b) { index += 1; continue }
            if b == UInt8(ascii: ".") || b == UInt8(ascii: "e") || b == UInt8(ascii: "E")
                || b == UInt8(ascii: "+") || b == UInt8(ascii: "-")
            {
                isInteger = false
                index += 1
                continue
            }
            break
        }
        let text = String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self)
        if isInteger, let i = Int64(text) { return .int(i) }
        guard let d = Double(text) else { throw JSONParseError(offset: start, message: "invalid number '\(text)'") }
        return .double(d)
    }
}
