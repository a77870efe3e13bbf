// Splits expression text into tokens, each with its offset (in Unicode scalars) for error columns.
import OrchestrateJSON

struct ExpressionToken: Sendable {
    enum Kind: Sendable, Equatable {
        case identifier(String)
        case number(JSONValue)
        case string(String)
        case symbol(String)   // . , ( ) [ ] ! && || == != < <= > >= + - * / %
        case end
    }

    let kind: Kind
    let offset: Int

    var text: String {
        switch kind {
        case .identifier(let s), .symbol(let s): return s
        case .number(let n): return n.jsonText
        case .string(let s): return "'\(s)'"
        case .end: return "end of expression"
        }
    }
}

/// A lexing or parsing error at an offset into the expression text.
struct ExpressionSyntaxError: Error, Sendable {
    let offset: Int
    let message: String
}

enum ExpressionLexer {
    /// Identifiers are `[A-Za-z_][A-Za-z0-9_-]*`: step ids may hold dashes (`steps.make-dir`),
    /// so subtraction needs spaces around its `-` when the left side is a name (`a - 1`).
    /// More tokens than any workflow writes in one expression: a 2 MB `1 + 1 + …` stops being
    /// read here, before the parser refuses its height (`ExprNode.maxHeight`).
    static let maxTokens = 10_000

    static func tokenize(_ text: String) throws(ExpressionSyntaxError) -> [ExpressionToken] {
        let s = Array(text.unicodeScalars)
        var tokens: [ExpressionToken] = []
        var i = 0
        func isIdentStart(_ c: Unicode.Scalar) -> Bool { c == "_" || ("a"..."z").contains(c) || ("A"..."Z").contains(c) }
        func isDigit(_ c: Unicode.Scalar) -> Bool { ("0"..."9").contains(c) }
        while i < s.count {
            let c = s[i]
            if c == " " || c == "\t" || c == "\n" || c == "\r" { i += 1; continue }
            let start = i
            guard tokens.count < maxTokens else {
                throw ExpressionSyntaxError(offset: start, message: "expression too long: more than \(maxTokens) tokens; "
                    + "split it, or compute the value in a step")
            }
            if isIdentStart(c) {
                i += 1
                while i < s.count, isIdentStart(s[i]) || isDigit(s[i]) || s[i] == "-" { i += 1 }
                // A trailing dash belongs to what follows ("a- 1"), not to the name.
                while s[i - 1] == "-" { i -= 1 }
                tokens.append(ExpressionToken(kind: .identifier(String(String.UnicodeScalarView(s[start..<i]))), offset: start))
            } else if isDigit(c) {
                while i < s.count, isDigit(s[i]) { i += 1 }
                var isDecimal = false
                if i + 1 < s.count, s[i] == ".", isDigit(s[i + 1]) {
                    isDecimal = true
                    i += 1
                    while i < s.count, isDigit(s[i]) { i += 1 }
                }
                if i < s.count, isIdentStart(s[i]) {
                    throw ExpressionSyntaxError(offset: i, message: "unexpected '\(s[i])' after a number")
                }
                let literal = String(String.UnicodeScalarView(s[start..<i]))
                if !isDecimal, let int = Int64(literal) {
                    tokens.append(ExpressionToken(kind: .number(.int(int)), offset: start))
                } else if let d = Double(literal) {
                    tokens.append(ExpressionToken(kind: .number(.double(d)), offset: start))
                } else {
                    throw ExpressionSyntaxError(offset: start, message: "invalid number '\(literal)'")
                }
            } else if c == "'" || c == "\"" {
                i += 1
                var value = String.UnicodeScalarView()
                var closed = false
                while i < s.count {
                    if s[i] == c {
                        // 'it''s' (a doubled quote) is one quote, as in YAML and SQL.
                        if c == "'", i + 1 < s.count, s[i + 1] == "'" { value.append("'"); i += 2; continue }
                        closed = true
                        i += 1
                        break
                    }
                    if c == "\"", s[i] == "\\", i + 1 < s.count {
                        switch s[i + 1] {
                        case "n": value.append("\n")
                        case "t": value.append("\t")
                        case "r": value.append("\r")
                        case "\\", "\"", "'": value.append(s[i + 1])
                        default:
                            throw ExpressionSyntaxError(offset: i, message: "unknown escape '\\\(s[i + 1])' in string")
                        }
                        i += 2
                        continue
                    }
                    value.append(s[i])
                    i += 1
                }
                guard closed else { throw ExpressionSyntaxError(offset: start, message: "unterminated string") }
                tokens.append(ExpressionToken(kind: .string(String(value)), offset: start))
            } else {
                let two = i + 1 < s.count ? String(String.UnicodeScalarView([c, s[i + 1]])) : ""
                if ["&&", "||", "==", "!=", "<=", ">="].contains(two) {
                    tokens.append(ExpressionToken(kind: .symbol(two), offset: start))
                    i += 2
                    if i < s.count, s[i] == "=", two == "==" || two == "!=" {
                        throw ExpressionSyntaxError(offset: i - 2, message: "unknown operator '\(two)='; use '\(two)'")
                    }
                    continue
                }
                switch c {
                case ".", ",", "(", ")", "[", "]", "!", "<", ">", "+", "-", "*", "/", "%":
                    tokens.append(ExpressionToken(kind: .symbol(String(c)), offset: start))
                    i += 1
                case "=":
                    throw ExpressionSyntaxError(offset: start, message: "unexpected '='; use '==' to compare")
                case "&":
                    throw ExpressionSyntaxError(offset: start, message: "unexpected '&'; use '&&' for 'and'")
                case "|":
                    throw ExpressionSyntaxError(offset: start, message: "unexpected '|'; use '||' for 'or'")
                default:
                    throw ExpressionSyntaxError(offset: start, message: "unexpected character '\(c)'")
                }
            }
        }
        tokens.append(ExpressionToken(kind: .end, offset: s.count))
        return tokens
    }
}
