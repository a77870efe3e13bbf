// The built-in functions of the expression language: names, arities and what they compute.
import OrchestrateExactPath
import OrchestrateJSON

/// A function callable in expressions. Names are case-sensitive.
///
/// | function | result |
/// |---|---|
/// | `format('{0}-{1}', a, b)` | placeholders replaced by the arguments (`{{`/`}}` for braces) |
/// | `basename(p)`, `dirname(p)` | the last path component / everything before it |
/// | `json(v)` / `fromJSON(s)` | compact JSON text / the value parsed from JSON text |
/// | `length(v)` | characters of a string, elements of an array or object; null → 0 |
/// | `contains(h, n)` | substring test for strings, element test for arrays |
/// | `startsWith(s, p)`, `endsWith(s, p)` | string prefix / suffix tests |
/// | `join(array, sep)` | elements as text joined by `sep` (default `,`) |
/// | `lower(s)`, `upper(s)`, `string(v)` | case mapping; any value as text |
/// | `default(v, fallback)` | `fallback` when `v` is null, else `v` |
enum BuiltinFunction: String, Sendable, CaseIterable {
    case format, basename, dirname, json, fromJSON, length, contains, startsWith, endsWith, join
    case lower, upper, string, `default`

    /// Allowed argument counts (`Int.max` upper bound: variadic).
    var arity: ClosedRange<Int> {
        switch self {
        case .format: return 1...Int.max
        case .basename, .dirname, .json, .fromJSON, .length, .lower, .upper, .string: return 1...1
        case .contains, .startsWith, .endsWith, .default: return 2...2
        case .join: return 1...2
        }
    }

    var arityDescription: String {
        switch (arity.lowerBound, arity.upperBound) {
        case (let n, Int.max): return "at least \(n) argument\(n == 1 ? "" : "s")"
        case (let a, let b) where a == b: return "\(a) argument\(a == 1 ? "" : "s")"
        case (let a, let b): return "\(a) to \(b) arguments"
        }
    }

    /// Applies the function to evaluated arguments. `fail` builds the error for a bad argument.
    func apply(_ args: [JSONValue], fail: (String) -> EvaluationError) throws(EvaluationError) -> JSONValue {
        func string(_ index: Int) throws(EvaluationError) -> String {
            guard case .string(let s) = args[index] else {
                throw fail("\(rawValue)() expects a string as argument \(index + 1), got \(args[index].typeName)")
            }
            return s
        }
        switch self {
        case .format:
            return .string(try BuiltinFunction.formatText(try string(0), Array(args.dropFirst()), fail: fail))
        case .basename:
            return .string(PathText.basename(try string(0)))
        case .dirname:
            return .string(PathText.dirname(try string(0)))
        case .json:
            return .string(args[0].jsonText)
        case .fromJSON:
            do { return try JSONValue(parsing: try string(0)) }
            catch let e as JSONParseError { throw fail("fromJSON(): \(e.description)") }
            catch { throw fail("fromJSON(): \(error)") }
        case .length:
            switch args[0] {
            case .string(let s): return .int(Int64(s.count))
            case .array(let a): return .int(Int64(a.count))
            case .object(let o): return .int(Int64(o.count))
            case .null: return .int(0)
            default: throw fail("length() expects a string, array or object, got \(args[0].typeName)")
            }
        case .contains:
            switch args[0] {
            case .string(let s):
                return .bool(s.contains(args[1].interpolated))
            case .array(let a):
                return .bool(a.contains { ExpressionEvaluator.equal($0, args[1]) })
            case .null:
                return .bool(false)
            default:
                throw fail("contains() expects a string or an array first, got \(args[0].typeName)")
            }
        case .startsWith:
            return .bool(try string(0).hasPrefix(try string(1)))
        case .endsWith:
            return .bool(try string(0).hasSuffix(try string(1)))
        case .join:
            guard case .array(let a) = args[0] else {
                throw fail("join() expects an array first, got \(args[0].typeName)")
            }
            let separator = args.count > 1 ? args[1].interpolated : ","
            return .string(a.map(\.interpolated).joined(separator: separator))
        case .lower:
            return .string(try string(0).lowercased())
        case .upper:
            return .string(try string(0).uppercased())
        case .string:
            return .string(args[0].interpolated)
        case .default:
            return args[0].isNull ? args[1] : args[0]
        }
    }

    /// `{0}`-style formatting; `{{` and `}}` stand for literal braces.
    private static func formatText(_ template: String, _ values: [JSONValue],
                               fail: (String) -> EvaluationError) throws(EvaluationError) -> String
    {
        let s = Array(template)
        var out = ""
        var i = 0
        while i < s.count {
            if s[i] == "{", i + 1 < s.count, s[i + 1] == "{" { out.append("{"); i += 2; continue }
            if s[i] == "}", i + 1 < s.count, s[i + 1] == "}" { out.append("}"); i += 2; continue }
            if s[i] == "{" {
                var j = i + 1
                while j < s.count, s[j].isASCII, s[j].isNumber { j += 1 }
                guard j > i + 1, j < s.count, s[j] == "}", let n = Int(String(s[(i + 1)..<j])) else {
                    throw fail("format(): '{' must start a placeholder such as {0}, or be doubled")
                }
                guard values.indices.contains(n) else {
                    throw fail("format(): placeholder {\(n)} but only \(values.count) value\(values.count == 1 ? "" : "s") given")
                }
                out += values[n].interpolated
                i = j + 1
                continue
            }
            if s[i] == "}" { throw fail("format(): unmatched '}'; write '}}' for a brace") }
            out.append(s[i])
            i += 1
        }
        return out
    }
}

/// POSIX-style path text operations (no file system access), on the path's bytes (PathBytes):
/// a "/" that a combining mark follows is one Swift character, but a "/" to the kernel, so
/// `basename("x/../\u{301}evil")` must be "\u{301}evil", not "../\u{301}evil".
enum PathText {
    private static let slash = PathBytes.slash

    /// The path's bytes without trailing slashes (a lone "/" kept).
    private static func trimmed(_ path: String) -> ArraySlice<UInt8> {
        var bytes = ArraySlice(path.utf8)
        while bytes.count > 1, bytes.last == slash { bytes = bytes.dropLast() }
        return bytes
    }

    /// `basename("/a/b.mov")` → "b.mov"; trailing slashes ignored; "/" → "/".
    static func basename(_ path: String) -> String {
        let p = trimmed(path)
        if p.elementsEqual([slash]) { return "/" }
        if let at = p.lastIndex(of: slash) { return String(decoding: p[(at + 1)...], as: UTF8.self) }
        return String(decoding: p, as: UTF8.self)
    }

    /// `dirname("/a/b.mov")` → "/a"; `dirname("b")` → "."; `dirname("/b")` → "/".
    static func dirname(_ path: String) -> String {
        let p = trimmed(path)
        guard let at = p.lastIndex(of: slash) else { return "." }
        var head = p[..<at]
        while head.count > 1, head.last == slash { head = head.dropLast() }
        return head.isEmpty ? "/" : String(decoding: head, as: UTF8.self)
    }

    /// Makes `path` absolute against `directory` and removes `.`, `..` and doubled slashes.
    static func absolute(_ path: String, against directory: String) -> String {
        let joined = PathBytes.isAbsolute(path) ? path : directory + "/" + path
        var parts: [String] = []
        for part in PathBytes.components(joined, omittingEmpty: true) {
            if part.utf8.elementsEqual(".".utf8) { continue }
            if part.utf8.elementsEqual("..".utf8) { if !parts.isEmpty { parts.removeLast() }; continue }
            parts.append(part)
        }
        return "/" + parts.joined(separator: "/")
    }
}
