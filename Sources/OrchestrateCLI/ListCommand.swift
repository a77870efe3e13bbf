import ArgumentParser
import OrchestrateEngine
import OrchestrateStore

struct ListCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "list",
        abstract: "List the runs in the state store, oldest first.",
        discussion: """
            Examples:
              orchestrate list --status failed --status interrupted
              orchestrate list --label batch=7 --queue uploads --json
            """)

    @Option(name: .customLong("status"), help: ArgumentHelp(
        "Only runs with this status: \(RunStatus.allCases.map(\.rawValue).joined(separator: ", ")), or interrupted (repeatable).",
        valueName: "status"))
    var statuses: [String] = []

    @Option(name: .customLong("label"), help: ArgumentHelp("Only runs with this label, KEY=VALUE (repeatable).", valueName: "key=value"))
    var labels: [String] = []

    @Option(name: .customLong("id"), help: ArgumentHelp("Only runs whose id starts with this (repeatable).", valueName: "id"))
    var ids: [String] = []

    @Option(name: .customLong("queue"), help: ArgumentHelp("Only runs of this named queue (repeatable).", valueName: "name"))
    var queues: [String] = []

    @OptionGroup var global: GlobalOptions

    func run() throws {
        let known = RunDocument.knownStatuses
        for status in statuses where !known.contains(status) {
            throw CLIFailure.usage("unknown status '\(status)'; one of \(known.sorted().joined(separator: ", "))")
        }
        let store = try global.openStore()
        let runs = try store.listRuns(RunFilter(labels: try InputParsing.labels(labels), queues: queues.isEmpty ? nil : Set(queues)))
            .filter { statuses.isEmpty || statuses.contains(RunDisplay.effectiveStatus($0)) }
            .filter { run in ids.isEmpty || ids.contains { run.id.hasPrefix($0) } }
        for run in runs {
            if global.json {
                Terminal.line(try RunDocument.summary(run, store: store).jsonText)
            } else {
                let node = run.ownerIsLive ? run.owner?.node ?? "-" : "-"
                Terminal.line("\(run.id)  \(RunDisplay.effectiveStatus(run).padding(12)) \(run.workflowName.padding(20)) "
                    + "\(RunDisplay.time(run.createdAt))  \(run.queue.padding(10)) \(node)")
            }
        }
    }
}
