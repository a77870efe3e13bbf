import ArgumentParser
import OrchestrateEngine
import OrchestrateStore
import OrchestrateTokenBucket

struct ResumeCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "resume",
        abstract: "Continue a run that was interrupted (Ctrl-C, SIGTERM, killed, crashed, power cut).",
        discussion: """
            Steps that finished keep their outputs and are not run again; a step that was running \
            starts again with its last checkpoint; a run that was compensating continues its \
            compensations. The workflow is read from the state store as it was when the run started, \
            not from the file. Refused while the run's owner is still alive. A failed or cancelled \
            run is not resumed: `orchestrate retry RUN` runs again what did not succeed.

            Examples:
              orchestrate resume RUN
              orchestrate resume RUN --max-rate 5M   # slower now (0 removes the cap)
            """)

    @Argument(help: "The run id.")
    var runID: String

    @Option(name: .customLong("max-parallel"), help: ArgumentHelp("Steps running at once (default: cores × 4).", valueName: "n"))
    var maxParallel: Int?

    @Option(name: .customLong("max-rate"), help: MaxRateOption.help("the run, replacing the cap it had (0 removes it)"),
            transform: MaxRateOption.parse)
    var maxRate: RateTimetable?

    @OptionGroup var global: GlobalOptions

    func run() throws {
        let store = try global.openStore()
        try RunArgument.check(runID, store: store)
        guard var run = try store.run(runID) else { throw CLIFailure.usage("no run \(runID) in \(try global.storeLocation().redacted)") }
        guard !run.status.isFinished else {
            // Nothing to continue: say what runs it again instead.
            let next = run.status == .succeeded
                ? "nothing to resume; to run it again from the start: orchestrate run \(NextCommands.quoted(run.workflowFile)) --id \(runID) --rerun"
                : "to run again what did not succeed: \(NextCommands.command("retry", runID, global))"
            throw CLIFailure(status: run.status == .succeeded ? ExitStatus.success : ExitStatus.runFailed,
                             message: "run \(runID) already finished: \(run.status.rawValue); \(next)")
        }
        if let maxRate { run.rateCap = maxRate }
        let registry = global.loadPlugins()
        let workflow = try WorkflowLoading.parse(source: run.workflowSource, file: run.workflowFile, registry: registry)
        try InputParsing.checkSecrets(workflow)
        try RunSession.execute(run: run, workflow: workflow, store: store, registry: registry,
                               maxParallel: maxParallel, global: global,
                               options: try global.engineOptions())
    }
}
