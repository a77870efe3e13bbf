import OrchestrateExactPath
import OrchestratePluginKit

/// A folder's listing as a server sends it, parsed. Every name is checked before it is used: a
/// name becomes a local path inside the destination folder and goes into FTP commands, so `.`,
/// `..`, `/`, `\`, NUL and control characters are refused (the whole transfer fails, naming the
/// entry: a server that sends such a name is not to be trusted with the rest of the tree).
enum Listing {
    enum Kind: Equatable {
        case file(size: Int64)
        case directory
        /// A symbolic link or anything else that is neither: skipped by a tree download.
        case other(String)
    }

    struct Entry { var name: String; var kind: Kind }

    /// One MLSD line (RFC 3659 §7): `fact=value;fact=value; name`. The current and parent
    /// folder entries (`type=cdir`, `type=pdir`) give nil.
    /// Cut at the first space byte: as a String character, a space that a combining mark
    /// follows is not " ", and a name like "\u{301}x;type=dir; y" would pass its tail for the name.
    static func mlsd(_ line: String, folder: String) throws(StepError) -> Entry? {
        let bytes = line.utf8
        guard let space = bytes.firstIndex(of: UInt8(ascii: " ")) else { return nil }
        let name = String(decoding: bytes[bytes.index(after: space)...], as: UTF8.self)
        var facts: [String: String] = [:]
        for fact in bytes[..<space].split(separator: UInt8(ascii: ";")) {
            let pair = fact.split(separator: UInt8(ascii: "="), maxSplits: 1)
            if pair.count == 2 { facts[String(decoding: pair[0], as: UTF8.self).lowercased()] = String(decoding: pair[1], as: UTF8.self) }
        }
        let type = facts["type"]?.lowercased() ?? ""
        if type == "cdir" || type == "pdir" { return nil }
        try check(name, folder: folder)
        switch type {
        case "file":
            guard let size = facts["size"].flatMap({ Int64($0) }) else {
                throw .permanent("the listing of \(folder) gives no size for \(name)", code: "bad_listing")
            }
            return Entry(name: name, kind: .file(size: size))
        case "dir": return Entry(name: name, kind: .directory)
        default: return Entry(name: name, kind: .other(type.isEmpty ? "no type" : type))
        }
    }

    /// One LIST line in the Unix `ls -l` format (vsftpd, ProFTPD, most servers without MLSD):
    /// `drwxr-xr-x 2 owner group 4096 Nov 27 18:00 name`. `total N` gives nil.
    static func unixLS(_ line: String, folder: String) throws(StepError) -> Entry? {
        if line.hasPrefix("total ") || line.isEmpty { return nil }
        // The name is what follows the eighth field (it may hold spaces). Fields end at space
        // bytes (see `mlsd`).
        let space = UInt8(ascii: " ")
        var rest = ArraySlice(line.utf8)
        var fields: [String] = []
        while fields.count < 8 {
            while rest.first == space { rest = rest.dropFirst() }
            guard let end = rest.firstIndex(of: space) else {
                throw .permanent("the listing of \(folder) has a line this plugin cannot read: \(line.prefix(200))", code: "bad_listing")
            }
            fields.append(String(decoding: rest[..<end], as: UTF8.self))
            rest = rest[end...]
        }
        var name = String(decoding: rest.dropFirst(), as: UTF8.self)
        let type = fields[0].first ?? "?"
        if type == "l", let arrow = name.firstRange(of: " -> ") { name = String(name[..<arrow.lowerBound]) }
        if PathBytes.isDotOrDotDot(name) { return nil }
        try check(name, folder: folder)
        switch type {
        case "-":
            guard let size = Int64(fields[4]) else {
                throw .permanent("the listing of \(folder) gives no size for \(name)", code: "bad_listing")
            }
            return Entry(name: name, kind: .file(size: size))
        case "d": return Entry(name: name, kind: .directory)
        case "l": return Entry(name: name, kind: .other("symbolic link"))
        default: return Entry(name: name, kind: .other("type \(type)"))
        }
    }

    private static func check(_ name: String, folder: String) throws(StepError) {
        guard RemoteName.isSafeEntry(name) else {
            let shown = String(name.unicodeScalars.map { $0.value < 32 || $0.value == 127 ? "?" : Character($0) }.prefix(200))
            throw .permanent("""
                the server listed an entry named \"\(shown)\" in \(folder): refused (a listed name may not be . or .., \
                nor hold / or \\ or control characters: it would lead outside the destination folder)
                """, code: "bad_remote_name")
        }
    }

    /// Splits a listing's bytes into lines (CRLF or LF), keeping at most `cap` bytes in all.
    struct LineSplitter {
        private var pending: [UInt8] = []
        private var total = 0
        let cap: Int

        init(cap: Int) { self.cap = cap }

        mutating func feed(_ bytes: UnsafeRawBufferPointer, _ line: (String) -> Void) throws(StepError) {
            total += bytes.count
            guard total <= cap else {
                throw .permanent("a folder's listing exceeds \(cap >> 20) MiB: refused", code: "listing_too_large")
            }
            for byte in bytes {
                if byte == UInt8(ascii: "\n") {
                    emit(line)
                } else {
                    pending.append(byte)
                }
            }
        }

        mutating func finish(_ line: (String) -> Void) throws(StepError) {
            if !pending.isEmpty { emit(line) }
        }

        private mutating func emit(_ line: (String) -> Void) {
            if pending.last == UInt8(ascii: "\r") { pending.removeLast() }
            line(String(decoding: pending, as: UTF8.self))
            pending.removeAll(keepingCapacity: true)
        }
    }
}
