import ArgumentParser
import Foundation
import OrchestrateEngine

struct SubmitCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "submit",
        abstract: "Add a run of a workflow to the queue; `serve` executes it.",
        discussion: """
            Validates the workflow and its inputs now (so a bad submission fails here, exit 2) and \
            journals the run as queued, whether or not a `serve` is running. The queue runs higher \
            priorities first, then in submission order. Secrets are read from the environment of \
            the `serve` that executes the run.

            Example:
              orchestrate submit workflows/local-upload.yaml --input source=a.mov --input outbox=/srv/out --label batch=7
            """)

    @Argument(help: "The workflow file.") var file: String

    @Option(name: .customLong("input"), help: ArgumentHelp("An input value, as NAME=VALUE (repeatable).", valueName: "name=value"))
    var inputs: [String] = []

    @Option(name: .customLong("inputs"), help: ArgumentHelp("A JSON object file of input values.", valueName: "file.json"))
    var inputsFile: String?

    @Option(help: "Higher runs first (default 0).") var priority: Int = 0

    @Option(name: .customLong("label"), help: ArgumentHelp("KEY=VALUE, for `list --label` (repeatable).", valueName: "key=value"))
    var labels: [String] = []

    @Option(help: ArgumentHelp("A run id of your choosing (default: generated).", valueName: "name"))
    var id: String?

    @OptionGroup var global: GlobalOptions

    func validate() throws {
        if let id, id.isEmpty || id.contains("/") || id.contains(" ") {
            throw ValidationError("--id must be non-empty, without '/' or spaces")
        }
    }

    func run() throws {
        let registry = global.loadPlugins()
        let workflow = try WorkflowLoading.load(path: file, registry: registry)
        let resolved = try InputParsing.resolve(workflow: workflow, pairs: inputs, file: inputsFile)
        let store = try global.openStore()
        if let id, try store.run(id) != nil { throw CLIFailure.usage("a run named \(id) already exists") }
        let run = try RunLauncher(store: store, stateDirectory: global.resolvedStateDirectory())
            .create(workflow, inputs: resolved, status: .queued, id: id, labels: try InputParsing.labels(labels),
                    priority: priority)
        Terminal.line(global.json ? "{\"id\":\"\(run.id)\"}" : run.id)
    }
}
