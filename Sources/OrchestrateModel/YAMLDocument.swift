// Reading YAML into a small located tree.
//
// Yams composes the document (libyaml underneath) and gives every node a 1-based line:column
// mark. We copy that into `YAMLNode`, our own Sendable tree that keeps mapping pairs in file
// order, *duplicates included*, so the decoder can report each duplicate key where it is.
//
// Yams itself refuses duplicate keys: it throws `duplicatedKeysInMapping` with the mark of the
// first occurrence only. To still see the whole file, we overwrite that first occurrence in a
// copy of the text with a same-width placeholder (so every other mark stays put), compose again,
// and put the real key text back when copying the tree. Only when that is impossible (a
// multi-line or complex key) does a duplicate stop the reading with a single diagnostic.
import OrchestrateJSON
import Yams

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
        switch text {
        case "", "~", "null", "Null", "NULL": return .null
        case "true", "True", "TRUE": return .bool(true)
        case "false", "False", "FALSE": return .bool(false)
        case ".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF": return .double(.infinity)
        case "-.inf", "-.Inf", "-.INF": return .double(-.infinity)
        case ".nan", ".NaN", ".NAN": return .double(.nan)
        default: break
        }
        if let i = YAMLScalar.integer(text) { return .int(i) }
        if YAMLScalar.looksLikeFloat(text), let d = Double(text) { return .double(d) }
        return .string(text)
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

/// The text of a workflow split into lines of Unicode scalars, to turn (line, column) marks into
/// text and back. Line breaks are the ones libyaml counts.
struct SourceText: Sendable {
    let file: String
    let lines: [[Unicode.Scalar]]

    init(file: String, text: String) {
        self.file = file
        var lines: [[Unicode.Scalar]] = [[]]
        var previousWasCR = false
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\n":
                if !previousWasCR { lines.append([]) }
            case "\r", "\u{85}", "\u{2028}", "\u{2029}":
                lines.append([])
            default:
                lines[lines.count - 1].append(scalar)
            }
            previousWasCR = scalar == "\r"
        }
        self.lines = lines
    }

    func location(line: Int, column: Int) -> SourceLocation {
        SourceLocation(file: file, line: line, column: column)
    }

    /// The scalar at a 1-based position, nil past the end of a line.
    func character(line: Int, column: Int) -> Unicode.Scalar? {
        guard lines.indices.contains(line - 1), lines[line - 1].indices.contains(column - 1) else { return nil }
        return lines[line - 1][column - 1]
    }

    /// Where the character at `offset` (in Unicode scalars) of a scalar node's *value* sits in the
    /// file. Walks the source from the node's mark, matching value characters against source
    /// characters and stepping over quotes, escapes, line folds and indentation. Exact for the
    /// common one-line scalars; a close guess otherwise (never before the node).
    func location(ofValueOffset offset: Int, in node: YAMLNode) -> SourceLocation {
        guard let scalar = node.scalar else { return node.location }
        var line = node.location.line
        var column = node.location.column
        switch scalar.style {
        case .plain: break
        case .singleQuoted, .doubleQuoted: column += 1
        case .literal, .folded:
            // Content starts on the next line at the block's indentation.
            line += 1
            column = 1
            while let c = character(line: line, column: column), c == " " { column += 1 }
        }
        let value = Array(scalar.text.unicodeScalars)
        var i = 0
        var skipped = 0
        while i < min(offset, value.count) {
            guard lines.indices.contains(line - 1) else { return node.location }
            guard let c = character(line: line, column: column) else {
                // End of a source line: the value continues on the next one after indentation.
                line += 1
                column = 1
                while let c = character(line: line, column: column), c == " " || c == "\t" { column += 1 }
                if value[i] == "\n" || value[i] == " " { i += 1 }
                continue
            }
            if c == value[i] {
                if scalar.style == .singleQuoted, c == "'" { column += 1 }  // '' stands for '
                i += 1
                column += 1
                skipped = 0
            } else if scalar.style == .doubleQuoted, c == "\\" {
                let next = character(line: line, column: column + 1)
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

/// The result of reading a YAML file: its root (nil for an empty document) or the syntax error.
enum YAMLReader {
    /// Composes `text` into a located tree, or returns the diagnostic that stopped it.
    static func read(_ text: String, source: SourceText) -> Result<YAMLNode?, Diagnostic> {
        var working = text
        var restored: [Position: (text: String, style: YAMLScalar.Style)] = [:]
        for attempt in 0..<10_000 {
            do {
                // The basic resolver: Yams' duplicate-key check hashes every key with its
                // resolved tag, and the default resolver finds a plain key's tag by trying seven
                // regular expressions on it (a third of a 10,000-step chain's instructions,
                // bench/engine). We read keys as text (`YAMLPair.name`), so keys are duplicates
                // when their text is, which is what the basic resolver (every plain scalar a
                // string) checks; scalar values are typed later, by `YAMLScalar.jsonValue`.
                guard let root = try Yams.compose(yaml: working, .basic) else { return .success(nil) }
                return .success(convert(root, source: source, restored: restored))
            } catch let YamlError.duplicatedKeysInMapping(duplicates, context) {
                let mark = context.mark
                guard let key = duplicates.first,
                      let masked = mask(key: key, line: mark.line, column: mark.column, in: working,
                                        source: source, serial: attempt)
                else {
                    let name = duplicates.first ?? "?"
                    return .failure(Diagnostic(location: source.location(line: mark.line, column: mark.column),
                                               message: "duplicate key '\(name)'"))
                }
                working = masked.text
                restored[Position(line: mark.line, column: mark.column)] = (key, masked.style)
            } catch let error as YamlError {
                return .failure(diagnostic(for: error, source: source))
            } catch {
                return .failure(Diagnostic(location: source.location(line: 1, column: 1), message: "invalid YAML: \(error)"))
            }
        }
        return .failure(Diagnostic(location: source.location(line: 1, column: 1), message: "too many duplicate keys"))
    }

    struct Position: Hashable { let line: Int; let column: Int }

    private static func convert(_ node: Node, source: SourceText,
                                restored: [Position: (text: String, style: YAMLScalar.Style)]) -> YAMLNode
    {
        let (line, column) = node.mark.map { ($0.line, $0.column) } ?? (1, 1)
        let location = source.location(line: line, column: column)
        switch node {
        case .scalar(let s):
            if let original = restored[Position(line: line, column: column)] {
                return YAMLNode(kind: .scalar(YAMLScalar(text: original.text, style: original.style, tag: nil)),
                                location: location)
            }
            let style: YAMLScalar.Style
            switch s.style {
            case .singleQuoted: style = .singleQuoted
            case .doubleQuoted: style = .doubleQuoted
            case .literal: style = .literal
            case .folded: style = .folded
            default: style = .plain
            }
            let tag = s.tag.rawValue.isEmpty || s.tag.rawValue == "!" ? nil : s.tag.rawValue
            return YAMLNode(kind: .scalar(YAMLScalar(text: s.string, style: style, tag: tag)), location: location)
        case .mapping(let m):
            let pairs = m.map { YAMLPair(key: convert($0.key, source: source, restored: restored),
                                         value: convert($0.value, source: source, restored: restored)) }
            return YAMLNode(kind: .mapping(pairs), location: location)
        case .sequence(let s):
            return YAMLNode(kind: .sequence(s.map { convert($0, source: source, restored: restored) }), location: location)
        case .alias(let a):
            // Yams resolves aliases while composing; this is not expected to happen.
            let anchor = a.anchor.rawValue
            return YAMLNode(kind: .scalar(YAMLScalar(text: "*" + anchor, style: .plain, tag: nil)), location: location)
        }
    }

    /// Overwrites the key token at line:column with a unique placeholder of the same width.
    private static func mask(key: String, line: Int, column: Int, in text: String, source: SourceText,
                             serial: Int) -> (text: String, style: YAMLScalar.Style)?
    {
        var lines = SourceText(file: "", text: text).lines
        guard lines.indices.contains(line - 1) else { return nil }
        let row = lines[line - 1]
        let start = column - 1
        guard row.indices.contains(start) else { return nil }
        var end = start
        let style: YAMLScalar.Style
        switch row[start] {
        case "\"", "'":
            let quote = row[start]
            style = quote == "\"" ? .doubleQuoted : .singleQuoted
            end = start + 1
            while end < row.count {
                if quote == "\"", row[end] == "\\" { end += 2; continue }
                if row[end] == quote {
                    if quote == "'", end + 1 < row.count, row[end + 1] == "'" { end += 2; continue }
                    break
                }
                end += 1
            }
            guard end < row.count else { return nil }
            end += 1
        default:
            style = .plain
            let keyScalars = Array(key.unicodeScalars)
            guard !keyScalars.isEmpty, start + keyScalars.count <= row.count,
                  Array(row[start..<start + keyScalars.count]) == keyScalars
            else { return nil }
            end = start + keyScalars.count
        }
        // Private-use characters: valid in plain YAML scalars, never in a real workflow key.
        var placeholder = [Unicode.Scalar](repeating: Unicode.Scalar(0xE000)!, count: end - start)
        placeholder[0] = Unicode.Scalar(0xE000 + UInt32(serial % 6000) + 1)!
        lines[line - 1].replaceSubrange(start..<end, with: placeholder)
        // Re-join with "\n": libyaml counts any line break as one, so marks are unchanged.
        let joined = lines.map { String(String.UnicodeScalarView($0)) }.joined(separator: "\n")
        return (joined, style)
    }

    /// A diagnostic for a libyaml scanner/parser/composer error, at its problem mark.
    private static func diagnostic(for error: YamlError, source: SourceText) -> Diagnostic {
        func make(_ context: YamlError.Context?, _ problem: String, _ mark: Mark) -> Diagnostic {
            let location = source.location(line: mark.line, column: mark.column)
            if let row = source.lines.indices.contains(mark.line - 1) ? source.lines[mark.line - 1] : nil,
               row.prefix(max(mark.column, 1)).contains("\t"),
               row.prefix(max(mark.column - 1, 0)).allSatisfy({ $0 == " " || $0 == "\t" })
            {
                return Diagnostic(location: location,
                                  message: "tab character in indentation; YAML indents with spaces only")
            }
            var message = "invalid YAML: \(problem)"
            if let context {
                message += " (\(context.text) at \(context.mark.line):\(context.mark.column))"
            }
            return Diagnostic(location: location, message: message)
        }
        switch error {
        case let .scanner(context, problem, mark, _), let .parser(context, problem, mark, _),
             let .composer(context, problem, mark, _):
            return make(context, problem, mark)
        case let .reader(problem, offset, _, yaml):
            var line = 1, column = 1
            for (i, c) in yaml.unicodeScalars.enumerated() {
                if i == offset { break }
                if c == "\n" { line += 1; column = 1 } else { column += 1 }
            }
            return Diagnostic(location: source.location(line: line, column: column), message: "invalid text: \(problem)")
        default:
            return Diagnostic(location: source.location(line: 1, column: 1), message: "invalid YAML: \(error)")
        }
    }
}
