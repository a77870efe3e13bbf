// The syntax tree of `${{ … }}` expressions, and the public `Expression` wrapper.
import OrchestrateJSON

/// A parsed `${{ … }}` expression: its source text, where it starts in the file, and a tree that
/// `evaluate(in:)` walks. Parse errors and unknown names are reported while the workflow loads,
/// so at run time only data-dependent errors remain (e.g. indexing a number).
///
///     let e = try Expression(parsing: "format('{0}.bin', inputs.name)")
///     try e.evaluate(in: EvaluationContext(inputs: ["name": "a"]))   // "a.bin"
public struct Expression: Sendable, CustomStringConvertible {
    /// The text between `${{` and `}}`, trimmed (or the whole `if:` value).
    public let source: String
    /// Where `source` starts in the workflow file.
    public let location: SourceLocation
    let root: ExprNode

    init(source: String, location: SourceLocation, root: ExprNode) {
        self.source = source
        self.location = location
        self.root = root
    }

    /// Parses a stand-alone expression (no `${{ }}`), for tests and tools. Locations are reported
    /// against `file` line 1, column = offset + 1.
    public init(parsing text: String, file: String = "<expression>") throws(Diagnostic) {
        let start = SourceLocation(file: file, line: 1, column: 1)
        self = try ExpressionParser.parse(text, locate: { start.advanced(by: $0) })
    }

    public var description: String { "${{ \(source) }}" }

    /// The step ids named by `steps.<id>` (or `steps['id']`) anywhere in the expression.
    public var referencedSteps: Set<String> {
        Set(root.contextReferences().compactMap { $0.context == .steps ? $0.name : nil })
    }

    /// Whether the expression may read `run.dir` (or the whole `run` context): such a step's
    /// files are on the node that ran it.
    public var readsRunDirectory: Bool {
        root.contextReferences().contains { $0.context == .run && ($0.name == nil || $0.name == "dir") }
    }

    /// Every reference into a context, for validation.
    var contextReferences: [ContextReference] { root.contextReferences() }
}

/// The names an expression starts from.
enum ContextName: String, Sendable, CaseIterable {
    case inputs, secrets, steps, run, item, env
    /// The file an `on.watch` hands over (only in `on.watch`'s `inputs` and `destination`).
    case file
}

/// `inputs.source`, `steps.create.outputs`, …: a context and the static names after it, if any.
struct ContextReference: Sendable {
    let context: ContextName
    /// The first property (`source` in `inputs.source`), nil when the context is used whole or
    /// indexed with a computed value.
    let name: String?
    let nameLocation: SourceLocation
    /// The second property (`outputs` in `steps.create.outputs`), when static.
    let member: String?
    let memberLocation: SourceLocation?
    /// The parts after `member` (`x` in `steps.create.outputs.x`): a name, or nil for an index
    /// that is a number or computed (`outputs[0]`).
    let rest: [(name: String?, location: SourceLocation)]
    /// Where the whole reference starts (the context name).
    let location: SourceLocation
}

enum UnaryOperator: String, Sendable { case not = "!", negate = "-" }

enum BinaryOperator: String, Sendable {
    case or = "||", and = "&&"
    case equal = "==", notEqual = "!="
    case less = "<", lessOrEqual = "<=", greater = ">", greaterOrEqual = ">="
    case add = "+", subtract = "-", multiply = "*", divide = "/", remainder = "%"
}

/// A node of the expression tree, with the location of the token that made it (the operator, the
/// property name, the function name…) so run-time errors point at the right character.
struct ExprNode: Sendable {
    indirect enum Kind: Sendable {
        case literal(JSONValue)
        case context(ContextName)
        case member(ExprNode, String)
        case index(ExprNode, ExprNode)
        case unary(UnaryOperator, ExprNode)
        case binary(BinaryOperator, ExprNode, ExprNode)
        case call(BuiltinFunction, [ExprNode])
    }

    let kind: Kind
    let location: SourceLocation
    /// The longest path from this node down to a leaf (a leaf: 1). Everything that walks the
    /// tree (evaluation, validation, even freeing it) recurses once per level, so the parser
    /// keeps it under `maxHeight`: a 20 KB chain `1 + 1 + … + 1` must not exhaust a stack.
    let height: Int
    static let maxHeight = 128

    init(kind: Kind, location: SourceLocation) {
        self.kind = kind
        self.location = location
        switch kind {
        case .literal, .context: height = 1
        case .member(let base, _): height = base.height + 1
        case .index(let base, let key): height = max(base.height, key.height) + 1
        case .unary(_, let operand): height = operand.height + 1
        case .binary(_, let left, let right): height = max(left.height, right.height) + 1
        case .call(_, let args): height = (args.map(\.height).max() ?? 0) + 1
        }
    }

    /// A static property name: `.name` or `['name']`.
    private static func staticKey(_ node: ExprNode) -> (String, SourceLocation)? {
        switch node.kind {
        case .literal(.string(let s)): return (s, node.location)
        default: return nil
        }
    }

    /// If this node is `context`, `context.a` or `context.a.b` (dots or literal indexes), the parts.
    private func chain() -> (ContextName, SourceLocation, [(String?, SourceLocation)])? {
        switch kind {
        case .context(let c): return (c, location, [])
        case .member(let base, let name):
            guard let (c, l, parts) = base.chain() else { return nil }
            return (c, l, parts + [(name, location)])
        case .index(let base, let key):
            guard let (c, l, parts) = base.chain() else { return nil }
            if let (name, nameLocation) = ExprNode.staticKey(key) { return (c, l, parts + [(name, nameLocation)]) }
            return (c, l, parts + [(nil, key.location)])
        default: return nil
        }
    }

    func contextReferences() -> [ContextReference] {
        var out: [ContextReference] = []
        collect(into: &out)
        return out
    }

    private func collect(into out: inout [ContextReference]) {
        // The longest chain wins: `steps.a.outputs.x` is one reference, not four.
        if let (context, contextLocation, parts) = chain() {
            let first = parts.first
            let second = parts.count > 1 ? parts[1] : nil
            out.append(ContextReference(context: context, name: first?.0, nameLocation: first?.1 ?? contextLocation,
                                        member: second?.0, memberLocation: second?.1,
                                        rest: parts.dropFirst(2).map { (name: $0.0, location: $0.1) }, location: contextLocation))
            // Computed indexes inside the chain may hold references of their own.
            collectIndexes(into: &out)
            return
        }
        switch kind {
        case .literal, .context: break
        case .member(let base, _): base.collect(into: &out)
        case .index(let base, let key): base.collect(into: &out); key.collect(into: &out)
        case .unary(_, let operand): operand.collect(into: &out)
        case .binary(_, let l, let r): l.collect(into: &out); r.collect(into: &out)
        case .call(_, let args): for a in args { a.collect(into: &out) }
        }
    }

    private func collectIndexes(into out: inout [ContextReference]) {
        switch kind {
        case .member(let base, _): base.collectIndexes(into: &out)
        case .index(let base, let key):
            base.collectIndexes(into: &out)
            if ExprNode.staticKey(key) == nil { key.collect(into: &out) }
        default: break
        }
    }
}
