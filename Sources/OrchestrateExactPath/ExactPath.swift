/// A file name, path or object key compared byte for byte, as filesystems and S3 compare them.
///
/// Swift's `String` compares by canonical equivalence: "café" with a precomposed "é" (U+00E9)
/// equals "cafe" followed by a combining accent (U+0301). On Linux (and for S3 keys) those are
/// two different names, two files that can sit side by side. A set or dictionary of paths keyed
/// by `String` folds them into one, and then one file is skipped, or a folder checked under one
/// name vouches for a symbolic link planted under the other. Key such collections by this.
///
/// ```swift
/// var made = Set<ExactPath>()
/// made.insert(ExactPath("caf\u{E9}"))
/// made.contains(ExactPath("cafe\u{301}"))   // false: another folder
/// ```
public struct ExactPath: Hashable, Sendable, CustomStringConvertible {
    public let string: String

    public init(_ string: String) { self.string = string }

    public var description: String { string }

    public static func == (a: ExactPath, b: ExactPath) -> Bool {
        a.string.utf8.elementsEqual(b.string.utf8)
    }

    public func hash(into hasher: inout Hasher) {
        var string = string
        string.withUTF8 { hasher.combine(bytes: UnsafeRawBufferPointer($0)) }
    }
}

extension ExactPath {
    /// Whether its bytes begin with `prefix`'s (`String.hasPrefix` compares by equivalence).
    public func hasPrefix(_ prefix: ExactPath) -> Bool { string.utf8.starts(with: prefix.string.utf8) }

    /// Whether this path is `folder` or lies below it ("/" holds every absolute path): the check
    /// that keeps a resolved path inside its root.
    public func isInside(_ folder: ExactPath) -> Bool {
        if folder.string == "/" { return string.utf8.first == UInt8(ascii: "/") }
        return self == folder || hasPrefix(ExactPath(folder.string + "/"))
    }

    /// What follows `prefix` (which it must have: `hasPrefix`).
    public func dropping(_ prefix: ExactPath) -> String {
        String(decoding: string.utf8.dropFirst(prefix.string.utf8.count), as: UTF8.self)
    }
}

/// Paths taken apart at their "/" bytes. String's `split(separator: "/")`, `contains("/")` and
/// `lastIndex(of: "/")` go by characters, and a "/" followed by a combining mark (U+0301) or a
/// joiner is one character that is not "/": `"../\u{301}/x".split(separator: "/")` is
/// `["../\u{301}", "x"]`, and the ".." a check looks for is not there while the filesystem
/// climbs. Every check of a name another party chose goes through these.
public enum PathBytes {
    public static let slash = UInt8(ascii: "/")

    /// The components between "/" bytes (empty ones kept unless `omittingEmpty`).
    public static func components(_ path: String, omittingEmpty: Bool = false) -> [String] {
        path.utf8.split(separator: slash, omittingEmptySubsequences: omittingEmpty).map { String(decoding: $0, as: UTF8.self) }
    }

    /// The last non-empty component ("" for "", "/" or "//"); trailing "/" bytes are ignored,
    /// so "media/" names "media", as `basename` does.
    public static func lastComponent(_ path: String) -> String {
        components(path, omittingEmpty: true).last ?? ""
    }

    /// Byte order, the order a tree's files are listed and journaled in. String's `<` compares
    /// canonical equivalents as equal ("\u{E9}" and "e\u{301}" are two files to the kernel), which
    /// would leave their order to the sort and the listing.
    public static func precedes(_ a: String, _ b: String) -> Bool {
        a.utf8.lexicographicallyPrecedes(b.utf8)
    }

    /// Whether `text` holds the byte `byte` ("/", "\\", NUL).
    public static func contains(_ text: String, _ byte: UInt8) -> Bool { text.utf8.contains(byte) }

    public static func isAbsolute(_ path: String) -> Bool { path.utf8.first == slash }

    public static func endsWithSlash(_ path: String) -> Bool { path.utf8.last == slash }

    /// Whether `component` is exactly "." or "..".
    public static func isDotOrDotDot(_ component: String) -> Bool {
        component.utf8.elementsEqual(".".utf8) || component.utf8.elementsEqual("..".utf8)
    }

    /// Whether a name a server listed can be one path component inside a local folder: not
    /// empty, not "." or "..", no "/" or "\\" byte, no control character (bytes below 32, 127).
    public static func isSafeListedName(_ name: String) -> Bool {
        !name.isEmpty && !isDotOrDotDot(name)
            && !name.utf8.contains { $0 == slash || $0 == UInt8(ascii: "\\") || $0 < 32 || $0 == 127 }
    }

    /// A name in a message, quoted, its control characters escaped: C0 and DEL (a newline
    /// planted in a name cannot forge a log line), C1 (U+009B opens a terminal escape) and the
    /// bidirectional overrides and isolates (U+202A-202E, U+2066-2069: text shown reversed).
    public static func quoted(_ name: String) -> String {
        var out = "\""
        for scalar in name.unicodeScalars {
            if isEscapedWhenShown(scalar) {
                out += "\\u{\(String(scalar.value, radix: 16))}"
            } else {
                out.unicodeScalars.append(scalar)
            }
        }
        return out + "\""
    }

    /// What a message escapes: C0 and DEL, C1 and the bidirectional overrides and isolates.
    public static func isEscapedWhenShown(_ scalar: Unicode.Scalar) -> Bool {
        let v = scalar.value
        return v < 32 || (127 ... 159).contains(v) || (0x202A ... 0x202E).contains(v) || (0x2066 ... 0x2069).contains(v)
    }

    /// Whether `name`'s bytes end with `suffix`'s (`String.hasSuffix` goes by characters).
    public static func hasSuffix(_ name: String, _ suffix: String) -> Bool {
        name.utf8.reversed().starts(with: suffix.utf8.reversed())
    }

    /// `bytes` (a name that may not be UTF-8) as text, each byte that is not part of valid UTF-8
    /// as `\xNN`.
    public static func shown(_ bytes: [UInt8]) -> String {
        var text = ""
        var rest = bytes[...]
        while !rest.isEmpty {
            var valid = rest.count
            while valid > 0 && String(validating: rest.prefix(valid), as: UTF8.self) == nil { valid -= 1 }
            if valid > 0 {
                text += String(decoding: rest.prefix(valid), as: UTF8.self)
                rest = rest.dropFirst(valid)
            } else {
                let hex = String(rest.first!, radix: 16, uppercase: true)
                text += "\\x" + (hex.count < 2 ? "0" : "") + hex
                rest = rest.dropFirst()
            }
        }
        return text
    }

    /// `path` cut at its last "/" byte: what is before it and what follows; nil without one.
    public static func splitAtLastSlash(_ path: String) -> (head: String, tail: String)? {
        let bytes = path.utf8
        guard let slashAt = bytes.lastIndex(of: slash) else { return nil }
        return (String(decoding: bytes[..<slashAt], as: UTF8.self), String(decoding: bytes[bytes.index(after: slashAt)...], as: UTF8.self))
    }
}
