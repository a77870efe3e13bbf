// Evaluating expressions against the data of a run.
import OrchestrateJSON

/// What an expression can see while a run executes. Every field has a default so callers set
/// only what they have:
///
///     var ctx = EvaluationContext(inputs: ["api": "https://api.vimeo.com"])
///     ctx.steps["create"] = ["status": "succeeded", "outputs": ["json": ["uri": "/videos/1"]]]
public struct EvaluationContext: Sendable {
    /// The resolved inputs object (see `Workflow.resolveInputs`).
    public var inputs: JSONValue
    /// Secret values by declared name, read from the environment for this attempt.
    public var secrets: [String: String]
    /// Step id → `{"outputs": {...}, "status": "succeeded" | "failed" | "skipped"}`.
    public var steps: [String: JSONValue]
    /// `{"id": ..., "dir": ..., "attempt": n}`.
    public var run: JSONValue
    /// The current element inside a `for_each` step; nil elsewhere.
    public var item: JSONValue?
    public var env: [String: String]
    /// The file an `on.watch` hands over (`path`, `name`, `relative`, …); nil elsewhere.
    public var file: JSONValue?

    public init(inputs: JSONValue = .object([:]), secrets: [String: String] = [:], steps: [String: JSONValue] = [:],
                run: JSONValue = .object([:]), item: JSONValue? = nil, env: [String: String] = [:], file: JSONValue? = nil)
    {
        self.file = file
        self.inputs = inputs
        self.secrets = secrets
        self.steps = steps
        self.run = run
        self.item = item
        self.env = env
    }
}

/// A run-time failure of an expression (indexing a number, dividing by zero, a missing secret…),
/// at the exact spot in the workflow file.
public struct EvaluationError: Error, Sendable, CustomStringConvertible {
    public let location: SourceLocation
    public let message: String

    public init(location: SourceLocation, message: String) {
        self.location = location
        self.message = message
    }

    /// `FILE:LINE:COL: error: MESSAGE`
    public var description: String { "\(location): error: \(message)" }
}

extension Expression {
    /// The expression's value. A property missing from an object reads as null (so
    /// `default(steps.a.outputs.size, 0)` works); reading a property of a string or a number,
    /// or indexing one, is an `EvaluationError`.
    public func evaluate(in context: EvaluationContext) throws(EvaluationError) -> JSONValue {
        try ExpressionEvaluator(context: context).evaluate(root)
    }
}

struct ExpressionEvaluator {
    let context: EvaluationContext

    func evaluate(_ node: ExprNode) throws(EvaluationError) -> JSONValue {
        func fail(_ message: String) -> EvaluationError { EvaluationError(location: node.location, message: message) }
        switch node.kind {
        case .literal(let value):
            return value

        case .context(let name):
            switch name {
            case .inputs: return context.inputs
            case .secrets: return .object(context.secrets.mapValues { .string($0) })
            case .steps: return .object(context.steps)
            case .run: return context.run
            case .env: return .object(context.env.mapValues { .string($0) })
            case .item:
                guard let item = context.item else { throw fail("'item' is only available inside a for_each step") }
                return item
            case .file:
                guard let file = context.file else { throw fail("'file' is only available in on.watch") }
                return file
            }

        case .member(let base, let name):
            if case .context(.secrets) = base.kind {
                guard let secret = context.secrets[name] else { throw fail("secret '\(name)' has no value") }
                return .string(secret)
            }
            return try property(name, of: try evaluate(base), at: node)

        case .index(let base, let key):
            let container = try evaluate(base)
            let k = try evaluate(key)
            switch (container, k) {
            case (.null, _):
                return .null
            case (.array(let a), _):
                guard let i = k.intValue, k.typeName == "integer" || k.typeName == "number" else {
                    throw fail("an array index must be an integer, not \(k.typeName)")
                }
                return i >= 0 && i < a.count ? a[Int(i)] : .null
            case (.object(let o), .string(let s)):
                return o[s] ?? .null
            case (.object, _):
                throw fail("an object key must be a string, not \(k.typeName)")
            default:
                throw fail("cannot index \(article(container.typeName)) (only arrays and objects can be indexed)")
            }

        case .unary(.not, let operand):
            return .bool(!(try evaluate(operand)).isTruthy)

        case .unary(.negate, let operand):
            switch try evaluate(operand) {
            case .int(let i) where i != .min: return .int(-i)
            case let v:
                guard let d = v.doubleValue else { throw fail("cannot negate \(article(v.typeName))") }
                return .double(-d)
            }

        case .binary(.or, let l, let r):
            let left = try evaluate(l)
            return left.isTruthy ? left : try evaluate(r)

        case .binary(.and, let l, let r):
            let left = try evaluate(l)
            return left.isTruthy ? try evaluate(r) : left

        case .binary(let op, let l, let r):
            return try binary(op, try evaluate(l), try evaluate(r), fail: fail)

        case .call(let function, let args):
            var values: [JSONValue] = []
            for a in args { values.append(try evaluate(a)) }
            return try function.apply(values, fail: fail)
        }
    }

    private func property(_ name: String, of value: JSONValue, at node: ExprNode) throws(EvaluationError) -> JSONValue {
        switch value {
        case .object(let o): return o[name] ?? .null
        case .null: return .null
        default:
            throw EvaluationError(location: node.location,
                                  message: "cannot read property '\(name)' of \(article(value.typeName))")
        }
    }

    private func binary(_ op: BinaryOperator, _ a: JSONValue, _ b: JSONValue,
                        fail: (String) -> EvaluationError) throws(EvaluationError) -> JSONValue
    {
        switch op {
        case .equal: return .bool(ExpressionEvaluator.equal(a, b))
        case .notEqual: return .bool(!ExpressionEvaluator.equal(a, b))
        case .less, .lessOrEqual, .greater, .greaterOrEqual:
            let order: Int
            if case .int(let x) = a, case .int(let y) = b {
                order = x < y ? -1 : x == y ? 0 : 1
            } else if let x = a.doubleValue, let y = b.doubleValue {
                order = x < y ? -1 : x == y ? 0 : 1
            } else if case .string(let x) = a, case .string(let y) = b {
                order = x < y ? -1 : x == y ? 0 : 1
            } else {
                throw fail("cannot compare \(article(a.typeName)) with \(article(b.typeName)) using '\(op.rawValue)'")
            }
            switch op {
            case .less: return .bool(order < 0)
            case .lessOrEqual: return .bool(order <= 0)
            case .greater: return .bool(order > 0)
            default: return .bool(order >= 0)
            }
        case .add:
            if a.stringValue != nil || b.stringValue != nil { return .string(a.interpolated + b.interpolated) }
            return try arithmetic(op, a, b, fail: fail)
        default:
            return try arithmetic(op, a, b, fail: fail)
        }
    }

    /// Integer arithmetic stays integral (overflow is an error); anything with a double is double.
    /// `/` of two integers is an integer when it divides exactly, else a double.
    private func arithmetic(_ op: BinaryOperator, _ a: JSONValue, _ b: JSONValue,
                            fail: (String) -> EvaluationError) throws(EvaluationError) -> JSONValue
    {
        guard let x = a.doubleValue, let y = b.doubleValue else {
            throw fail("'\(op.rawValue)' needs numbers, got \(article(a.typeName)) and \(article(b.typeName))")
        }
        if case .int(let i) = a, case .int(let j) = b {
            let result: (Int64, Bool)
            switch op {
            case .add: result = i.addingReportingOverflow(j)
            case .subtract: result = i.subtractingReportingOverflow(j)
            case .multiply: result = i.multipliedReportingOverflow(by: j)
            case .divide:
                guard j != 0 else { throw fail("division by zero") }
                if i % j == 0 { result = i.dividedReportingOverflow(by: j) } else { return .double(x / y) }
            default:
                guard j != 0 else { throw fail("division by zero") }
                result = i.remainderReportingOverflow(dividingBy: j)
            }
            guard !result.1 else { throw fail("integer overflow in '\(op.rawValue)'") }
            return .int(result.0)
        }
        switch op {
        case .add: return .double(x + y)
        case .subtract: return .double(x - y)
        case .multiply: return .double(x * y)
        case .divide:
            guard y != 0 else { throw fail("division by zero") }
            return .double(x / y)
        default:
            guard y != 0 else { throw fail("division by zero") }
            return .double(x.truncatingRemainder(dividingBy: y))
        }
    }

    /// JSON equality where numbers compare by value (`1 == 1.0`); no other conversions.
    static func equal(_ a: JSONValue, _ b: JSONValue) -> Bool { JSONValue.sameValue(a, b) }
}
