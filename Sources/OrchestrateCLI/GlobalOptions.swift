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

    @Option(name: .customLong("store"), help: ArgumentHelp(
        "Where the state lives: sqlite:DIR (the default, the state directory), or a PostgreSQL URL or libpq "
            + "key=value string shared by several machines (default: $ORCHESTRATE_STORE). Keep its password in "
            + "a password file (PGPASSFILE), not here.", valueName: "url"))
    var store: String?

    @Option(name: .customLong("node"), help: ArgumentHelp(
        "This machine's name among those sharing a store (default: $ORCHESTRATE_NODE, else the host name).",
        valueName: "name"))
    var node: String?

    @Option(name: .customLong("plugin-path"), help: ArgumentHelp(
        "Another plugin library or directory of plugins, searched after the standard places (repeatable).",
        valueName: "path"))
    var pluginPaths: [String] = []

    @Flag(name: .customLong("json"), help: "Machine-readable output (events as JSON lines).")
    var json = false

    @Option(name: .customLong("isolation"), help: ArgumentHelp(
        "Where plugins run unless a step says (isolation:): in-process (default) or process, a child per attempt "
            + "so a crashing plugin fails only its step (default: $ORCHESTRATE_ISOLATION).", valueName: "mode"))
    var isolation: StepIsolation?

    /// Engine settings common to the commands that execute runs.
    func engineOptions() throws -> EngineOptions {
        var options = EngineOptions()
        let env = ProcessInfo.processInfo.environment
        if let isolation {
            options.defaultIsolation = isolation
        } else if let mode = env["ORCHESTRATE_ISOLATION"].flatMap({ $0.isEmpty ? nil : $0 }) {
            guard let value = StepIsolation(rawValue: mode) else {
                let values = StepIsolation.allValueStrings.joined(separator: " or ")
                throw CLIFailure.usage("ORCHESTRATE_ISOLATION takes \(values), not '\(mode)'")
            }
            options.defaultIsolation = value
        }
        if let limit = env["ORCHESTRATE_RUNNER_MEMORY_LIMIT"].flatMap(Int64.init) { options.runnerMemoryLimit = limit }
        if let lease = env["ORCHESTRATE_LEASE_SECONDS"].flatMap(Double.init), lease > 0 { options.leaseDuration = lease; options.heartbeatInterval = max(lease / 7.5, 0.2) }
        if let grace = env["ORCHESTRATE_TIMEOUT_GRACE_SECONDS"].flatMap(Double.init), grace > 0 { options.timeoutGrace = grace }
        if let report = env["ORCHESTRATE_HOLD_REPORT_SECONDS"].flatMap(Double.init), report > 0 { options.holdReportInterval = report }
        options.stateDirectory = resolvedStateDirectory()
        return options
    }

    /// The state directory, resolved as docs/design.md says: flag, $ORCHESTRATE_STATE, XDG.
    func resolvedStateDirectory() -> String {
        let env = ProcessInfo.processInfo.environment
        if let dir = stateDirectory, !dir.isEmpty { return absolute(dir) }
        if let dir = env["ORCHESTRATE_STATE"], !dir.isEmpty { return absolute(dir) }
        let base = env["XDG_STATE_HOME"].flatMap { $0.isEmpty ? nil : $0 }
            ?? ((env["HOME"] ?? NSHomeDirectory()) as NSString).appendingPathComponent(".local/state")
        return (base as NSString).appendingPathComponent("orchestrate")
    }

    /// The store `--store`, `$ORCHESTRATE_STORE` or the state directory names.
    func storeLocation() throws -> StoreLocation {
        let env = ProcessInfo.processInfo.environment
        guard let text = store ?? env["ORCHESTRATE_STORE"].flatMap({ $0.isEmpty ? nil : $0 }) else {
            return .sqlite(directory: resolvedStateDirectory())
        }
        do {
            return try StoreLocation.parse(text)
        } catch {
            throw CLIFailure.usage("\(error)")
        }
    }

    /// The SQLite commit level `ORCHESTRATE_SYNC` asks for; unset or empty is the default. A value
    /// that is neither level is refused rather than read as the default: a typo must not quietly
    /// cost the durability it asked for.
    static func synchronous(_ setting: String?) throws -> StoreOpening.Synchronous {
        guard let setting, !setting.isEmpty else { return .normal }
        guard let level = StoreOpening.Synchronous(setting: setting) else {
            throw CLIFailure.usage("ORCHESTRATE_SYNC must be normal or full, not '\(setting)'")
        }
        return level
    }

    /// Opens the store (creating or migrating its schema) as this node.
    func openStore() throws -> any StateStore {
        applyNode()
        let location = try storeLocation()
        if location.hasInlinePassword && store != nil {
            Terminal.warning("the --store URL holds a password, which `ps` shows to every local user: "
                + "use a password file (PGPASSFILE or passfile=) instead")
        }
        let sync = try Self.synchronous(ProcessInfo.processInfo.environment["ORCHESTRATE_SYNC"])
        do {
            return try StoreOpening.open(location, synchronous: sync)
        } catch let refusal as OwnedState.Refusal {
            throw CLIFailure.usage(refusal.description)  // another user's state: fix it, as the message says
        } catch {
            throw CLIFailure(status: ExitStatus.runFailed, message: "\(error)")
        }
    }

    /// `--node NAME` becomes `$ORCHESTRATE_NODE`, which `NodeName.current` reads on first use
    /// (and plugin runners inherit).
    func applyNode() {
        if let node, !node.isEmpty { setenv(NodeName.environmentVariable, node, 1) }
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
            return try WorkflowLoader.load(path: path, catalog: RegistryStepCatalog(registry: registry), remotes: RemotesFile())
        } catch {
            report(error, registry: registry)
            throw CLIFailure(status: ExitStatus.usage, message: "")
        }
    }

    static func parse(source: String, file: String, registry: PluginRegistry) throws -> Workflow {
        do {
            return try WorkflowLoader.parse(source: source, file: file, catalog: RegistryStepCatalog(registry: registry),
                                             remotes: RemotesFile())
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

/// `--isolation in-process|process`: help lists the values, and a wrong one is refused by name.
extension StepIsolation: ExpressibleByArgument {}
