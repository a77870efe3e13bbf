import ArgumentParser
import OrchestrateEngine
import OrchestrateOperations

struct RetryCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "retry",
        abstract: "Run a failed or cancelled run again; only what did not succeed runs.",
        discussion: """
            Steps that succeeded keep their outputs, unless a compensation undid them. The run is \
            executed here, in the foreground, as `run` and `resume` do (Ctrl-C interrupts it, \
            resumable); with --detach it is only queued again, for a `serve` to execute.

            Examples:
              orchestrate retry RUN
              orchestrate retry RUN --detach && orchestrate status RUN --watch   # a serve runs it
            """)

    @Argument(help: "The run id.") var runID: String

    @Flag(help: "Queue the run again for a `serve` instead of executing it here.")
    var detach = false

    @Option(name: .customLong("max-parallel"), help: ArgumentHelp("Steps running at once (default: cores × 4).", valueName: "n"))
    var maxParallel: Int?

    @OptionGroup var global: GlobalOptions

    func run() throws {
        if detach { return try ControlVerb.run(.retry, runID: runID, global: global) }
        let store = try global.openStore()
        guard let stored = try store.run(runID) else { throw CLIFailure.usage("no run \(runID) in \(try global.storeLocation().redacted)") }
        // Everything the run needs is checked before it is reset: a refusal changes nothing.
        let registry = global.loadPlugins()
        let workflow = try WorkflowLoading.parse(source: stored.workflowSource, file: stored.workflowFile, registry: registry)
        try InputParsing.checkSecrets(workflow)
        do {
            _ = try QueueControl(store: store, stateDirectory: global.resolvedStateDirectory()).apply(.retry, to: runID)
            Terminal.line("retrying \(runID): only what did not succeed runs", to: .standardError)
        } catch let refusal as QueueControl.Refusal {
            throw CLIFailure.usage(refusal.description)
        }
        guard let run = try store.run(runID) else { throw CLIFailure.usage("no run \(runID)") }
        try RunSession.execute(run: run, workflow: workflow, store: store, registry: registry,
                               maxParallel: maxParallel, global: global, options: try global.engineOptions())
    }
}
