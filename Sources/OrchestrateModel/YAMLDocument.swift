// The located YAML tree the workflow decoder reads (built by `YAMLReader`), and the source text
// its locations point into.
//
// `YAMLNode` is our own Sendable tree with a 1-based line:column on every node; it keeps mapping
// pairs in file order, *duplicates included*, so the decoder can report each duplicate key where
// it is.
import OrchestrateJSON

/// A YAML node with its position. Scalars keep their text and style; the meaning of a plain
/// scalar (null, bool, number or string) is decided later, by `jsonValue`.
struct YAMLNode: Sendable {
    enum Kind: Sendable {
        case scalar(YAMLScalar)
        case mapping([YAMLPair])
        case sequence([YAMLNode])
    }

    let kind: Kind
    let location: SourceLocation

    var scalar: YAMLScalar? { if case .scalar(let s) = kind { return s }; return nil }
    var pairs: [YAMLPair]? { if case .mapping(let p) = kind { return p }; return nil }
    var items: [YAMLNode]? { if case .sequence(let i) = kind { return i }; return nil }

    /// The scalar's text when this is a string-like scalar (quoted, or plain and not null/bool/number).
    var stringValue: String? {
        if case .string(let s) = scalar?.jsonValue { return s }
        return nil
    }

    /// "a mapping", "a string", ... for type errors.
    var kindDescription: String {
        switch kind {
        case .mapping: return "a mapping"
        case .sequence: return "a list"
        case .scalar(let s):
            switch s.jsonValue {
            case .null: return "null"
            case .bool: return "a boolean"
            case .int: return "an integer"
            case .double: return "a number"
            default: return "a string"
            }
        }
    }
}

struct YAMLPair: Sendable {
    let key: YAMLNode
    let value: YAMLNode
    /// The key as text (non-scalar keys are reported by the decoder and read as "").
    var name: String { key.scalar?.text ?? "" }
}

struct YAMLScalar: Sendable {
    enum Style: Sendable { case plain, singleQuoted, doubleQuoted, literal, folded }
    let text: String
    let style: Style
    /// An explicit tag such as `!!str` (nil when implicit).
    let tag: String?

    /// The value under the YAML 1.2 core schema: quoted scalars are strings; plain ones may be
    /// null (`null`, `~`, empty), booleans (`true`/`false` only — `yes`/`no`/`on` stay strings),
    /// integers (decimal, 0x, 0o) or floats.
    var jsonValue: JSONValue {
        if let tag {
            switch tag {
            case "tag:yaml.org,2002:str": return .string(text)
            case "tag:yaml.org,2002:null": return .null
            default: break
            }
        }
        guard style == .plain else { return .string(text) }
        // Most plain scalars are words (step ids, types, paths): anything but null, a boolean or
        // a number starts with another character, so it is a string without the checks below.
        if let first = text.utf8.first, !YAMLScalar.mayStartNonString(first) { return .string(text) }
        switch text {
        case "", "~", "null", "Null", "NULL": return .null
        case "true", "True", "TRUE": return .bool(true)
        case "false", "False", "FALSE": return .bool(false)
        case ".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF": return .double(.infinity)
        case "-.inf", "-.Inf", "-.INF": return .double(-.infinity)
        case ".nan", ".NaN", ".NAN": return .double(.nan)
        default: break
        }
        // A number starts with a digit, a sign or a dot ("true_to_size", "no-op" are words).
        if let first = text.utf8.first, (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(first | 0x20) {
            return .string(text)
        }
        if let i = YAMLScalar.integer(text) { return .int(i) }
        if YAMLScalar.looksLikeFloat(text), let d = Double(text) { return .double(d) }
        return .string(text)
    }

    /// Whether a plain scalar starting with this byte may be null, a boolean or a number:
    /// `~`, n/N (null), t/T, f/F (booleans), a digit, a sign or a dot (numbers, .inf, .nan).
    private static func mayStartNonString(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "+"), UInt8(ascii: "-"), UInt8(ascii: "."),
             UInt8(ascii: "~"), UInt8(ascii: "n"), UInt8(ascii: "N"), UInt8(ascii: "t"), UInt8(ascii: "T"),
             UInt8(ascii: "f"), UInt8(ascii: "F"):
            return true
        default:
            return false
        }
    }

    private static func integer(_ text: String) -> Int64? {
        if text.hasPrefix("0x"), text.count > 2 { return Int64(text.dropFirst(2), radix: 16) }
        if text.hasPrefix("0o"), text.count > 2 { return Int64(text.dropFirst(2), radix: 8) }
        var digits = Substring(text)
        if digits.first == "+" || digits.first == "-" { digits = digits.dropFirst() }
        guard !digits.isEmpty, digits.allSatisfy({ $0.isASCII && $0.isNumber }) else { return nil }
        return Int64(text.hasPrefix("+") ? String(text.dropFirst()) : text)
    }

    private static func looksLikeFloat(_ text: String) -> Bool {
        // [-+]? ( \.[0-9]+ | [0-9]+ ( \.[0-9]* )? ) ( [eE] [-+]? [0-9]+ )?
        var s = Substring(text)
        if s.first == "+" || s.first == "-" { s = s.dropFirst() }
        let mantissa = s.prefix { $0 != "e" && $0 != "E" }
        let exponent = s.dropFirst(mantissa.count)
        let parts = mantissa.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count <= 2, parts.allSatisfy({ $0.allSatisfy { $0.isASCII && $0.isNumber } }),
              parts.contains(where: { !$0.isEmpty })
        else { return false }
        if exponent.isEmpty { return true }
        var e = exponent.dropFirst()
        if e.first == "+" || e.first == "-" { e = e.dropFirst() }
        return !e.isEmpty && e.allSatisfy { $0.isASCII && $0.isNumber }
    }
}

/// The text of a workflow and where its lines are, to turn (line, column) marks into text and
/// back. Line breaks are the ones libyaml counts. Lines are decoded when asked for (only to
/// place or word a diagnostic, or an expression's position), not when a file is read.
struct SourceText: Sendable {
    let file: String
    private let utf8: [UInt8]
    /// Byte ranges of the lines, without their breaks.
    private let lineStarts: [Int]
    private let lineEnds: [Int]

    init(file: String, text: String) {
        self.file = file
        utf8 = Array(text.utf8)
        var starts = [0]
        var ends: [Int] = []
        var i = 0
        let count = utf8.count
        while i < count {
            let byte = utf8[i]
            var breakLength = 0
            switch byte {
            case UInt8(ascii: "\n"):
                if i > 0, utf8[i - 1] == UInt8(ascii: "\r") {
                    starts[starts.count - 1] = i + 1  // "\r\n" is one break: the line starts after it
                    i += 1
                    continue
                }
                breakLength = 1
            case UInt8(ascii: "\r"): breakLength = 1
            case 0xC2 where i + 1 < count && utf8[i + 1] == 0x85: breakLength = 2  // NEL
            case 0xE2 where i + 2 < count && utf8[i + 1] == 0x80 && (utf8[i + 2] == 0xA8 || utf8[i + 2] == 0xA9):
                breakLength = 3  // LINE and PARAGRAPH SEPARATOR
            default: break
            }
            if breakLength > 0 {
                ends.append(i)
                starts.append(i + breakLength)
                i += breakLength
            } else {
                i += 1
            }
        }
        ends.append(count)
        lineStarts = starts
        lineEnds = ends
    }

    func location(line: Int, column: Int) -> SourceLocation {
        SourceLocation(file: file, line: line, column: column)
    }

    /// The scalars of a 1-based line, without its line break; nil past the last line.
    func line(_ number: Int) -> [Unicode.Scalar]? {
        guard lineStarts.indices.contains(number - 1) else { return nil }
        let bytes = utf8[lineStarts[number - 1]..<lineEnds[number - 1]]
        return Array(String(decoding: bytes, as: UTF8.self).unicodeScalars)
    }

    /// The scalar at a 1-based position, nil past the end of a line.
    func character(line: Int, column: Int) -> Unicode.Scalar? {
        var rows = Rows(source: self)
        return rows.character(line: line, column: column)
    }

    /// The last line asked for, decoded once for the characters looked up on it.
    private struct Rows {
        let source: SourceText
        var number = 0
        var scalars: [Unicode.Scalar]?

        init(source: SourceText) { self.source = source }

        mutating func exists(_ line: Int) -> Bool { source.lineStarts.indices.contains(line - 1) }

        mutating func character(line: Int, column: Int) -> Unicode.Scalar? {
            if line != number {
                number = line
                scalars = source.line(line)
            }
            guard let scalars, scalars.indices.contains(column - 1) else { return nil }
            return scalars[column - 1]
        }
    }

    /// Where the character at `offset` (in Unicode scalars) of a scalar node's *value* sits in the
    /// file. Walks the source from the node's mark, matching value characters against source
    /// characters and stepping over quotes, escapes, line folds and indentation. Exact for the
    /// common one-line scalars; a close guess otherwise (never before the node).
    func location(ofValueOffset offset: Int, in node: YAMLNode) -> SourceLocation {
        guard let scalar = node.scalar else { return node.location }
        var rows = Rows(source: self)
        var line = node.location.line
        var column = node.location.column
        switch scalar.style {
        case .plain: break
        case .singleQuoted, .doubleQuoted: column += 1
        case .literal, .folded:
            // Content starts on the next line at the block's indentation.
            line += 1
            column = 1
            while let c = rows.character(line: line, column: column), c == " " { column += 1 }
        }
        let value = Array(scalar.text.unicodeScalars)
        var i = 0
        var skipped = 0
        while i < min(offset, value.count) {
            guard rows.exists(line) else { return node.location }
            guard let c = rows.character(line: line, column: column) else {
                // End of a source line: the value continues on the next one after indentation.
                line += 1
                column = 1
                while let c = rows.character(line: line, column: column), c == " " || c == "\t" { column += 1 }
                if value[i] == "\n" || value[i] == " " { i += 1 }
                continue
            }
            if c == value[i] {
                if scalar.style == .singleQuoted, c == "'" { column += 1 }  // '' stands for '
                i += 1
                column += 1
                skipped = 0
            } else if scalar.style == .doubleQuoted, c == "\\" {
                let next = rows.character(line: line, column: column + 1)
                column += next == "x" ? 4 : next == "u" ? 6 : next == "U" ? 10 : 2
                i += 1
                skipped = 0
            } else {
                column += 1
                skipped += 1
                if skipped > 200 { return node.location }
            }
        }
        return location(line: line, column: column)
    }
}
