// Recursive-descent parser for `${{ … }}` expressions.
//
// Precedence, loosest first: `||`, `&&`, `== !=`, `< <= > >=`, `+ -`, `* / %`, unary `! -`,
// then property access `a.b`, indexing `a[0]` / `a['k']` and calls `f(x)`.
import OrchestrateJSON

enum ExpressionParser {
    /// Parses `text`; `locate` turns an offset into `text` (in Unicode scalars) into a file
    /// location, so every node and every error carries its exact line:column.
    static func parse(_ text: String, locate: @escaping (Int) -> SourceLocation) throws(Diagnostic) -> Expression {
        let tokens: [ExpressionToken]
        do { tokens = try ExpressionLexer.tokenize(text) }
        catch { throw Diagnostic(location: locate(error.offset), message: "invalid expression: \(error.message)") }
        var parser = Parser(tokens: tokens, locate: locate)
        do {
            guard tokens[0].kind != ExpressionToken.Kind.end else {
                throw ExpressionSyntaxError(offset: 0, message: "empty expression")
            }
            let root = try parser.parseOr()
            guard parser.peek.kind == .end else {
                throw ExpressionSyntaxError(offset: parser.peek.offset,
                                            message: "unexpected '\(parser.peek.text)' after a complete expression")
            }
            let firstOffset = tokens[0].offset
            let trimmed = text.trimmingWhitespace
            return Expression(source: trimmed, location: locate(firstOffset), root: root)
        } catch let error as ExpressionSyntaxError {
            throw Diagnostic(location: locate(error.offset), message: "invalid expression: \(error.message)")
        } catch let error as Diagnostic {
            throw error
        } catch {
            throw Diagnostic(location: locate(0), message: "invalid expression: \(error)")
        }
    }

    private struct Parser {
        let tokens: [ExpressionToken]
        let locate: (Int) -> SourceLocation
        var position = 0
        var depth = 0

        var peek: ExpressionToken { tokens[position] }

        mutating func advance() -> ExpressionToken {
            let t = tokens[position]
            if position < tokens.count - 1 { position += 1 }
            return t
        }

        func isSymbol(_ s: String) -> Bool { peek.kind == .symbol(s) }

        mutating func expect(_ s: String, _ what: String) throws -> ExpressionToken {
            guard isSymbol(s) else {
                let found = peek.kind == .end ? "the end of the expression" : "'\(peek.text)'"
                throw ExpressionSyntaxError(offset: peek.offset, message: "expected '\(s)' \(what), found \(found)")
            }
            return advance()
        }

        /// A node made at the token at `offset`, refused when the tree would grow taller than
        /// `ExprNode.maxHeight` (a chain of operators is parsed in a loop, but the tree it makes
        /// is as tall as the chain is long, and walking it recurses per level).
        func node(_ kind: ExprNode.Kind, at offset: Int) throws -> ExprNode {
            let made = ExprNode(kind: kind, location: locate(offset))
            guard made.height <= ExprNode.maxHeight else {
                throw ExpressionSyntaxError(offset: offset, message: "expression too long: more than \(ExprNode.maxHeight) "
                    + "operations, calls or properties nested in one another; split it, or compute the value in a step")
            }
            return made
        }

        /// One level of left-associative binary operators.
        mutating func binary(_ ops: [String], next: (inout Parser) throws -> ExprNode) throws -> ExprNode {
            var left = try next(&self)
            while case .symbol(let s) = peek.kind, ops.contains(s), let op = BinaryOperator(rawValue: s) {
                let token = advance()
                let right = try next(&self)
                left = try node(.binary(op, left, right), at: token.offset)
            }
            return left
        }

        mutating func parseOr() throws -> ExprNode {
            depth += 1
            defer { depth -= 1 }
            guard depth < 64 else { throw ExpressionSyntaxError(offset: peek.offset, message: "expression nested too deeply") }
            return try binary(["||"]) { try $0.parseAnd() }
        }
        mutating func parseAnd() throws -> ExprNode { try binary(["&&"]) { try $0.parseEquality() } }
        mutating func parseEquality() throws -> ExprNode { try binary(["==", "!="]) { try $0.parseComparison() } }
        mutating func parseComparison() throws -> ExprNode {
            try binary(["<", "<=", ">", ">="]) { try $0.parseAdditive() }
        }
        mutating func parseAdditive() throws -> ExprNode { try binary(["+", "-"]) { try $0.parseMultiplicative() } }
        mutating func parseMultiplicative() throws -> ExprNode { try binary(["*", "/", "%"]) { try $0.parseUnary() } }

        mutating func parseUnary() throws -> ExprNode {
            if isSymbol("!") || isSymbol("-") {
                let token = advance()
                depth += 1
                defer { depth -= 1 }
                guard depth < 64 else { throw ExpressionSyntaxError(offset: token.offset, message: "expression nested too deeply") }
                let operand = try parseUnary()
                if token.kind == .symbol("-") {
                    // Fold negative number literals so `-1` is a literal, not an operation.
                    if case .literal(.int(let i)) = operand.kind {
                        return ExprNode(kind: .literal(.int(-i)), location: locate(token.offset))
                    }
                    if case .literal(.double(let d)) = operand.kind {
                        return ExprNode(kind: .literal(.double(-d)), location: locate(token.offset))
                    }
                    return try node(.unary(.negate, operand), at: token.offset)
                }
                return try node(.unary(.not, operand), at: token.offset)
            }
            return try parsePostfix()
        }

        mutating func parsePostfix() throws -> ExprNode {
            var result = try parsePrimary()
            while true {
                if isSymbol(".") {
                    _ = advance()
                    guard case .identifier(let name) = peek.kind else {
                        throw ExpressionSyntaxError(offset: peek.offset, message: "expected a property name after '.'")
                    }
                    let token = advance()
                    result = try node(.member(result, name), at: token.offset)
                } else if isSymbol("[") {
                    let open = advance()
                    let key = try parseOr()
                    _ = try expect("]", "to close the index opened at column \(locate(open.offset).column)")
                    result = try node(.index(result, key), at: open.offset)
                } else {
                    return result
                }
            }
        }

        mutating func parsePrimary() throws -> ExprNode {
            let token = advance()
            let location = locate(token.offset)
            switch token.kind {
            case .number(let n): return ExprNode(kind: .literal(n), location: location)
            case .string(let s): return ExprNode(kind: .literal(.string(s)), location: location)
            case .identifier(let name):
                if isSymbol("(") { return try parseCall(name, token) }
                switch name {
                case "true": return ExprNode(kind: .literal(.bool(true)), location: location)
                case "false": return ExprNode(kind: .literal(.bool(false)), location: location)
                case "null": return ExprNode(kind: .literal(.null), location: location)
                default: break
                }
                guard let context = ContextName(rawValue: name) else {
                    let names = ContextName.allCases.map(\.rawValue)
                    throw Diagnostic(location: location,
                                     message: "unknown name '\(name)' (expressions start from \(quotedList(names)))"
                                         + didYouMean(name, names + ["true", "false", "null"]))
                }
                return ExprNode(kind: .context(context), location: location)
            case .symbol("("):
                let inner = try parseOr()
                _ = try expect(")", "to close the '(' at column \(location.column)")
                return inner
            case .end:
                throw ExpressionSyntaxError(offset: token.offset, message: "unexpected end of expression")
            case .symbol(let s):
                throw ExpressionSyntaxError(offset: token.offset, message: "unexpected '\(s)'")
            }
        }

        mutating func parseCall(_ name: String, _ nameToken: ExpressionToken) throws -> ExprNode {
            let location = locate(nameToken.offset)
            guard let function = BuiltinFunction(rawValue: name) else {
                throw Diagnostic(location: location, message: "unknown function '\(name)'"
                                 + didYouMean(name, BuiltinFunction.allCases.map(\.rawValue)))
            }
            let open = advance()
            var args: [ExprNode] = []
            if !isSymbol(")") {
                while true {
                    args.append(try parseOr())
                    if isSymbol(",") { _ = advance(); continue }
                    break
                }
            }
            _ = try expect(")", "to close the call to \(name)() opened at column \(locate(open.offset).column)")
            guard function.arity.contains(args.count) else {
                throw Diagnostic(location: location,
                                 message: "\(name)() takes \(function.arityDescription), not \(args.count)")
            }
            return try node(.call(function, args), at: nameToken.offset)
        }
    }
}

extension String {
    /// The string without leading and trailing spaces, tabs and line breaks.
    var trimmingWhitespace: String {
        let isSpace: (Character) -> Bool = { $0 == " " || $0 == "\t" || $0 == "\n" || $0 == "\r" }
        guard let first = firstIndex(where: { !isSpace($0) }), let last = lastIndex(where: { !isSpace($0) }) else { return "" }
        return String(self[first...last])
    }
}
