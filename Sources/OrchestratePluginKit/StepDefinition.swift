import OrchestrateJSON

/// One step type of a Swift plugin: its description and its code.
///
/// ```swift
/// struct Checksum: StepDefinition {
///     struct Inputs: StepInputs {                     // each input declared once (see StepInputs)
///         @Input(help: "file to hash", minLength: 1) var path: String
///         @Input(help: "stop after this many bytes", minimum: 1) var limit: Int64 = 1 << 40
///     }
///     struct Outputs: StepOutputs {                   // each output declared once (see StepOutputs)
///         @Output(help: "SHA-256 (hex)", pattern: "^[0-9a-f]{64}$") var sha256: String
///     }
///     static let id = "fs.checksum"
///     static let version = "1.0.0"
///     static let summary = "SHA-256 and size of a file."
///     static let inputSchema = Inputs.schemaText      // generated from the declarations
///     static let outputSchema = Outputs.schemaText    // generated too
///
///     static func run(_ step: StepContext) throws {
///         let inputs = try step.read(Inputs.self)     // typed, defaults applied
///         step.log(.info, "hashing \(inputs.path)")
///         var outputs = Outputs()
///         outputs.sha256 = try hash(inputs.path, limit: inputs.limit)
///         try step.setOutputs(outputs)
///     }
/// }
/// ```
///
/// `run` is called on a host worker thread, possibly for several steps at once: keep no mutable
/// global state. Returning normally is success (outputs are what `setOutputs` wrote); throwing a
/// `StepError` fails the attempt with its kind; any other error fails it as permanent (or as
/// cancelled when the step was cancelled), with the error's description as the message.
public protocol StepDefinition: SendableMetatype {
    /// Globally unique, lower-case, dot-separated: `fs.copy`, `http.upload`.
    static var id: String { get }
    /// Semantic version of this step type.
    static var version: String { get }
    /// One line for `orchestrate plugins list`.
    static var summary: String { get }
    /// Longer Markdown for `orchestrate plugins inspect`; empty for none.
    static var documentation: String { get }
    /// JSON Schema of the `with:` object (the host refuses the plugin if it is not JSON): write
    /// `Inputs.schemaText` of a `StepInputs` struct. The host checks the resolved `with:` against
    /// it and fills in its defaults before every attempt.
    static var inputSchema: String { get }
    /// JSON Schema of the outputs; empty for none: write `Outputs.schemaText` of a `StepOutputs`
    /// struct. When it lists `properties` (and no `additionalProperties`), `validate` refuses a
    /// `steps.X.outputs.Y` whose `Y` is not among them.
    static var outputSchema: String { get }
    /// True for a long-lived session step that takes items while it runs (`nextItem`).
    static var acceptsItems: Bool { get }
    /// True for a step whose outputs name a live, process-local resource (a connection) that
    /// later steps use (ABI 1.1 `ORC_STEP_OPENS_SESSION`): the host runs it again on resume and
    /// calls `closeSession` once no unfinished step needs it.
    static var opensSession: Bool { get }
    /// Releases the session a successful `run` described in `outputs`. Any thread; never
    /// concurrently with a run that uses that session.
    static func closeSession(outputs: JSONValue)

    static func run(_ step: StepContext) throws
}

extension StepDefinition {
    public static var documentation: String { "" }
    public static var outputSchema: String { "" }
    public static var acceptsItems: Bool { false }
    public static var opensSession: Bool { false }
    public static func closeSession(outputs: JSONValue) {}
}

/// A Swift plugin: a name and its step types. One `@_cdecl` line exports it:
///
/// ```swift
/// enum FSPlugin: PluginDefinition {
///     static let name = "fs"
///     static let version = "1.0.0"
///     static let summary = "Local file steps."
///     static let steps: [any StepDefinition.Type] = [Copy.self, Checksum.self]
/// }
///
/// @_cdecl("orchestrate_plugin_entry_v1")
/// public func orchestratePluginEntry() -> UnsafeRawPointer { FSPlugin.entry() }
/// ```
public protocol PluginDefinition {
    static var name: String { get }
    static var version: String { get }
    static var summary: String { get }
    static var steps: [any StepDefinition.Type] { get }
}

extension PluginDefinition {
    /// The `orc_plugin` description for this plugin, built on the first call and kept for the
    /// life of the process (as the ABI requires); later calls return the same pointer.
    public static func entry() -> UnsafeRawPointer {
        PluginDescriptions.description(of: Self.self)
    }
}
