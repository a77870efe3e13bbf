// What the model needs to know about step types: which exist and what inputs they take.
import OrchestrateJSON

/// A step type as a plugin declares it. The plugin host builds these from loaded plugins; tests
/// build them by hand.
public struct StepInfo: Sendable {
    /// E.g. `http.request`.
    public let id: String
    /// JSON Schema for `with:`; the subset checked is described on `SchemaValidator`.
    public let inputSchema: JSONValue
    public let outputSchema: JSONValue?
    /// True for long-lived steps that take new items while they run (persistent sessions).
    public let acceptsItems: Bool

    public init(id: String, inputSchema: JSONValue, outputSchema: JSONValue?, acceptsItems: Bool) {
        self.id = id
        self.inputSchema = inputSchema
        self.outputSchema = outputSchema
        self.acceptsItems = acceptsItems
    }
}

/// Lookup of step types. When a catalog is given to `WorkflowLoader`, unknown step types and
/// `with:` values that do not match a type's input schema are errors.
public protocol StepCatalog: Sendable {
    func stepInfo(for id: String) -> StepInfo?
    /// Every known id, for "did you mean" suggestions. Optional: defaults to none.
    var stepTypeIDs: [String] { get }
}

extension StepCatalog {
    public var stepTypeIDs: [String] { [] }
}

/// A catalog over a fixed list, handy for tests and tools.
public struct StaticStepCatalog: StepCatalog {
    public let steps: [String: StepInfo]

    public init(_ steps: [StepInfo]) {
        self.steps = Dictionary(steps.map { ($0.id, $0) }, uniquingKeysWith: { a, _ in a })
    }

    public func stepInfo(for id: String) -> StepInfo? { steps[id] }
    public var stepTypeIDs: [String] { steps.keys.sorted() }
}
