import ArgumentParser
import OrchestrateEngine
import OrchestrateStore
import OrchestrateTokenBucket

struct ResumeCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "resume",
        abstract: "Continue a run that was interrupted (killed, crashed, power cut).",
        discussion: """
            Steps that finished keep their outputs and are not run again; a step that was running \
            starts again with its last checkpoint; a run that was compensating continues its \
            compensations. The workflow is read from the state store as it was when the run started, \
            not from the file. Refused while the run's owner is still alive.

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
            throw CLIFailure(status: run.status == .succeeded ? ExitStatus.success : ExitStatus.runFailed,
                             message: "run \(runID) already finished: \(run.status.rawValue)")
        }
        if let maxRate { run.rateCap = maxRate }
        let registry = global.loadPlugins()
        let workflow = try WorkflowLoading.parse(source: run.workflowSource, file: run.workflowFile, registry: registry)
        try InputParsing.checkSecrets(workflow)
        try RunSession.execute(run: run, workflow: workflow, store: store, registry: registry,
                               maxParallel: maxParallel, json: global.json,
                               options: try global.engineOptions())
    }
}
