import ArgumentParser
import Foundation
import OrchestrateEngine
import OrchestrateJSON
import OrchestrateOperations
import OrchestrateTokenBucket
import OrchestrateStore

struct SubmitCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "submit",
        abstract: "Add a run of a workflow to the queue; `serve` executes it.",
        discussion: """
            Validates the workflow and its inputs now (so a bad submission fails here, exit 2) and \
            journals the run as queued, whether or not a `serve` is running. The queue runs higher \
            priorities first, then in submission order. Secrets are read from the environment of \
            the `serve` that executes the run.

            Examples:
              orchestrate submit workflows/local-upload.yaml --input source=a.mov --input outbox=/srv/out --label batch=7
              orchestrate submit flow.yaml --batch runs.jsonl   # one run per line
            """)

    @Argument(help: "The workflow file.") var file: String

    @Option(name: .customLong("input"), help: ArgumentHelp("An input value, as NAME=VALUE (repeatable).", valueName: "name=value"))
    var inputs: [String] = []

    @Option(name: .customLong("inputs"), help: ArgumentHelp("A JSON object file of input values.", valueName: "file.json"))
    var inputsFile: String?

    @Option(help: "Higher runs first (default 0).") var priority: Int = 0

    @Option(help: ArgumentHelp("The named queue: only a `serve --queue NAME` takes the run (default: default).",
                               valueName: "name"))
    var queue: String = "default"

    @Option(name: .customLong("max-rate"), help: MaxRateOption.help("this run (all its transfers together)"),
            transform: MaxRateOption.parse)
    var maxRate: RateTimetable?

    @Option(name: .customLong("label"), help: ArgumentHelp("KEY=VALUE, for `list --label` (repeatable).", valueName: "key=value"))
    var labels: [String] = []

    @Option(help: ArgumentHelp(
        "A run id of your choosing, naming the job: an unfinished run of that id is queued to continue, a succeeded one not run again (default: generated).",
        valueName: "name"))
    var id: String?

    @Flag(help: "With --id: run again from the start even if a finished run of that id exists (it is replaced).")
    var rerun = false

    @Option(help: ArgumentHelp(
        "Submit one run per line of FILE (- for stdin), each line a JSON object of inputs merged over --input.",
        valueName: "file.jsonl"))
    var batch: String?

    @OptionGroup var global: GlobalOptions

    func validate() throws {
        if let id, !RunID.isValid(id) { throw ValidationError("--id: \(RunID.Invalid(id: id, stored: false))") }
        if id != nil && batch != nil { throw ValidationError("--id names one run; it cannot be used with --batch") }
        if rerun && id == nil { throw ValidationError("--rerun replaces the finished run of an --id; give the --id") }
        if !QueueName.isValid(queue) { throw ValidationError(QueueName.rule) }
    }

    func run() throws {
        let registry = global.loadPlugins()
        let workflow = try WorkflowLoading.load(path: file, registry: registry)
        let store = try global.openStore()
        // A run submitted here may execute on another node: its paths are that node's paths.
        var submission = RunSubmission(store: store)
        submission.labels = try InputParsing.labels(labels)
        submission.priority = priority
        submission.queue = queue
        submission.maxRate = maxRate
        // Validate every run's inputs before queueing any: a bad line queues nothing.
        var runs: [JSONValue] = []
        if let batch {
            for (line, extra) in try InputParsing.batchLines(batch) {
                do {
                    runs.append(try InputParsing.resolve(workflow: workflow, pairs: inputs, file: inputsFile, extra: extra))
                } catch let failure as CLIFailure {
                    throw CLIFailure.usage("\(batch):\(line): \(failure.message)")
                }
            }
        } else {
            runs.append(try InputParsing.resolve(workflow: workflow, pairs: inputs, file: inputsFile))
        }
        let created: [RunRecord]
        if let id {
            let existing = RunSubmission.ExistingRun.continueJob(rerun: rerun, stateDirectory: global.resolvedStateDirectory())
            switch try submission.submit(workflow, inputs: runs[0], id: id, existing: existing) {
            case .queued(let run, let replaced):
                if let replaced { RunIdentity.announceReplaced(id, replaced) }
                created = [run]
            case .continuing(let run, let requeued):
                Terminal.line("run \(id) exists and is not finished (\(RunDocument.effectiveStatus(run))): "
                    + (requeued ? "queued to continue where it stopped" : "already queued, not submitted twice"),
                    to: .standardError)
                created = [run]
            case .executing(let run, let owner):
                Terminal.line("run \(id) is already \(run.status.rawValue) in process \(owner.pid) on node \(owner.node); not submitted twice",
                              to: .standardError)
                created = [run]
            case .settled(let run):
                throw RunIdentity.settled(run, global: global)
            case .taken(let run):
                throw RunIdentity.otherJob(run, workflow: workflow)
            }
        } else {
            created = try submission.submit(workflow, inputs: runs)
        }
        for run in created { Terminal.line(global.json ? "{\"id\":\"\(run.id)\"}" : run.id) }
    }
}
