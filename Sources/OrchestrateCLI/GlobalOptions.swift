import ArgumentParser
import Foundation
import OrchestrateEngine
import OrchestrateModel
import OrchestratePluginHost
import OrchestrateStore

/// Options every command that touches state or plugins takes.
struct GlobalOptions: ParsableArguments {
    @Option(name: .customLong("state"), help: ArgumentHelp(
        "The state directory (default: $ORCHESTRATE_STATE, else $XDG_STATE_HOME/orchestrate).", valueName: "dir"))
    var stateDirectory: String?

    @Option(name: .customLong("plugin-path"), help: ArgumentHelp(
        "Another plugin library or directory of plugins, searched after the standard places (repeatable).",
        valueName: "path"))
    var pluginPaths: [String] = []

    @Flag(name: .customLong("json"), help: "Machine-readable output (events as JSON lines).")
    var json = false

    @Option(name: .customLong("isolation"), help: ArgumentHelp(
        "Where plugins run unless a step says (isolation:): in-process (default) or process, a child per attempt "
            + "so a crashing plugin fails only its step (default: $ORCHESTRATE_ISOLATION).", valueName: "mode"))
    var isolation: String?

    /// Engine settings common to the commands that execute runs.
    func engineOptions() throws -> EngineOptions {
        var options = EngineOptions()
        let env = ProcessInfo.processInfo.environment
        if let mode = isolation ?? env["ORCHESTRATE_ISOLATION"].flatMap({ $0.isEmpty ? nil : $0 }) {
            guard let value = StepIsolation(rawValue: mode) else {
                throw CLIFailure.usage("--isolation takes in-process or process, not '\(mode)'")
            }
            options.defaultIsolation = value
        }
        if let limit = env["ORCHESTRATE_RUNNER_MEMORY_LIMIT"].flatMap(Int64.init) { options.runnerMemoryLimit = limit }
        return options
    }

    /// The state directory, resolved as DESIGN.md says: flag, $ORCHESTRATE_STATE, XDG.
    func resolvedStateDirectory() -> String {
        let env = ProcessInfo.processInfo.environment
        if let dir = stateDirectory, !dir.isEmpty { return absolute(dir) }
        if let dir = env["ORCHESTRATE_STATE"], !dir.isEmpty { return absolute(dir) }
        let base = env["XDG_STATE_HOME"].flatMap { $0.isEmpty ? nil : $0 }
            ?? ((env["HOME"] ?? NSHomeDirectory()) as NSString).appendingPathComponent(".local/state")
        return (base as NSString).appendingPathComponent("orchestrate")
    }

    func openStore() throws -> SQLiteStateStore {
        let sync: SQLiteStateStore.Synchronous = ProcessInfo.processInfo.environment["ORCHESTRATE_SYNC"] == "full" ? .full : .normal
        do {
            return try SQLiteStateStore(directory: resolvedStateDirectory(), synchronous: sync)
        } catch {
            throw CLIFailure(status: ExitStatus.runFailed, message: "\(error)")
        }
    }

    /// Loads the plugins from the standard search path; refusals are printed as warnings (by
    /// the registry's `warn`), and a workflow that needs a refused plugin reports it again with
    /// its unknown step type.
    func loadPlugins(quiet: Bool = false) -> PluginRegistry {
        let executable = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath().path
        let paths = PluginRegistry.standardSearchPaths(
            executablePath: Bundle.main.executablePath ?? executable,
            environment: ProcessInfo.processInfo.environment,
            extra: pluginPaths.map(absolute))
        let registry = PluginRegistry(searchPaths: paths, warn: { message in
            if !quiet { Terminal.warning(message) }
        })
        return registry
    }

    private func absolute(_ path: String) -> String {
        path.hasPrefix("/") ? path : (FileManager.default.currentDirectoryPath as NSString).appendingPathComponent(path)
    }
}

/// Loading a workflow for a command: diagnostics go to stderr, all at once, exit status 2.
enum WorkflowLoading {
    static func load(path: String, registry: PluginRegistry) throws -> Workflow {
        do {
            return try WorkflowLoader.load(path: path, catalog: RegistryStepCatalog(registry: registry))
        } catch {
            report(error, registry: registry)
            throw CLIFailure(status: ExitStatus.usage, message: "")
        }
    }

    static func parse(source: String, file: String, registry: PluginRegistry) throws -> Workflow {
        do {
            return try WorkflowLoader.parse(source: source, file: file, catalog: RegistryStepCatalog(registry: registry))
        } catch {
            report(error, registry: registry)
            throw CLIFailure(status: ExitStatus.usage, message: "")
        }
    }

    /// Prints every diagnostic; when a step type is unknown and plugins were refused, says
    /// which plugin and why, since that is the likely cause.
    static func report(_ errors: WorkflowErrors, registry: PluginRegistry) {
        for diagnostic in errors.diagnostics { Terminal.line(diagnostic.description, to: .standardError) }
        if errors.diagnostics.contains(where: { $0.message.contains("unknown step type") }) {
            for refusal in registry.refusals {
                Terminal.line("note: \(refusal)", to: .standardError)
            }
        }
    }
}
