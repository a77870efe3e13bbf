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
