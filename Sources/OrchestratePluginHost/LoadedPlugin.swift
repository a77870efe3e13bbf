import COrchestratePlugin
import OrchestrateJSON

/// One step type a loaded plugin provides, copied out of the plugin's `orc_step_type` (the
/// strings and schemas are Swift values; only `run` still points into the library).
///
/// Instances live for the whole process (libraries are never unloaded), so the engine may keep
/// them anywhere and compare them by identity.
public final class StepType: @unchecked Sendable {
    /// Globally unique id, e.g. `fs.copy`; what a workflow names in `uses:`.
    public let id: String
    public let version: String
    /// One line for `orchestrate plugins list`.
    public let summary: String
    /// Longer Markdown text for `orchestrate plugins inspect`, if the plugin has any.
    public let documentation: String?
    /// JSON Schema of the step's `with:` object (an object schema, or `true`).
    public let inputSchema: JSONValue
    /// JSON Schema of the outputs the step sets, if the plugin declared one.
    public let outputSchema: JSONValue?
    /// True for long-lived session steps (`ORC_STEP_ACCEPTS_ITEMS`) that take items while they run.
    public let acceptsItems: Bool
    /// True for steps that open a session (`ORC_STEP_OPENS_SESSION`, ABI 1.1): their outputs
    /// name a process-local resource that `closeSession` releases.
    public let opensSession: Bool
    /// Name and resolved file of the plugin that provides the step.
    public let pluginName: String
    public let pluginPath: String

    /// The plugin's run function and its own NUL-terminated id (handed back as
    /// `orc_step_call.step_type`; it lives as long as the library, i.e. forever).
    let run: orc_step_run_fn
    let close: orc_session_close_fn?
    let cID: UnsafePointer<CChar>

    init(id: String, version: String, summary: String, documentation: String?, inputSchema: JSONValue,
         outputSchema: JSONValue?, acceptsItems: Bool, opensSession: Bool = false, pluginName: String,
         pluginPath: String, run: orc_step_run_fn, closeSession: orc_session_close_fn? = nil,
         cID: UnsafePointer<CChar>)
    {
        self.opensSession = opensSession
        self.close = closeSession
        self.id = id
        self.version = version
        self.summary = summary
        self.documentation = documentation
        self.inputSchema = inputSchema
        self.outputSchema = outputSchema
        self.acceptsItems = acceptsItems
        self.pluginName = pluginName
        self.pluginPath = pluginPath
        self.run = run
        self.cID = cID
    }

    /// Closes the session a successful run of this step opened (`outputs`: what it set).
    /// Does nothing for steps that open no session.
    public func closeSession(outputs: JSONValue) {
        guard opensSession, let close else { return }
        let text = outputs.jsonText
        text.withCString { outputsText in close(cID, outputsText) }
    }
}

/// A plugin library that passed every check: opened, described, and kept open for good.
///
/// `PluginLoader.load` returns the same instance for the same file, so identity (`===`) means
/// "same library".
public final class LoadedPlugin: @unchecked Sendable {
    /// The resolved path (symlinks followed) of the library.
    public let path: String
    public let name: String
    public let version: String
    public let summary: String
    /// The ABI version the plugin was built against (the major equals the host's).
    public let abiMajor: UInt32
    public let abiMinor: UInt32
    /// In the order the plugin listed them.
    public let stepTypes: [StepType]

    init(path: String, name: String, version: String, summary: String, abiMajor: UInt32, abiMinor: UInt32,
         stepTypes: [StepType])
    {
        self.path = path
        self.name = name
        self.version = version
        self.summary = summary
        self.abiMajor = abiMajor
        self.abiMinor = abiMinor
        self.stepTypes = stepTypes
    }
}
