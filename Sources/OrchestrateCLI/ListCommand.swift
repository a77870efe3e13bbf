import ArgumentParser
import OrchestrateEngine
import OrchestrateOperations
import OrchestrateStore

struct ListCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "list",
        abstract: "List the runs in the state store, oldest first.",
        discussion: """
            Examples:
              orchestrate list --status failed --status interrupted
              orchestrate list --workflow vimeo-upload --status failed --limit 50
              orchestrate list --label batch=7 --queue uploads --json
              orchestrate list --server https://bay-1:8080 --token-file ~/.orchestrate-token
            """)

    @Option(name: .customLong("status"), help: ArgumentHelp(
        "Only runs with this status: \(RunStatus.allCases.map(\.rawValue).joined(separator: ", ")) (interrupted includes runs whose process died; repeatable).",
        valueName: "status"))
    var statuses: [String] = []

    @Option(name: .customLong("label"), help: ArgumentHelp("Only runs with this label, KEY=VALUE (repeatable).", valueName: "key=value"))
    var labels: [String] = []

    @Option(name: .customLong("id"), help: ArgumentHelp("Only runs whose id starts with this (repeatable).", valueName: "id"))
    var ids: [String] = []

    @Option(name: .customLong("queue"), help: ArgumentHelp("Only runs of this named queue (repeatable).", valueName: "name"))
    var queues: [String] = []

    @Option(name: .customLong("workflow"), help: ArgumentHelp("Only runs of the workflow of this name.", valueName: "name"))
    var workflow: String?

    @Option(name: .customLong("limit"), help: ArgumentHelp("Only the newest N runs that match (still listed oldest first).", valueName: "n"))
    var limit: Int?

    @OptionGroup var global: GlobalOptions
    @OptionGroup var remote: RemoteOptions

    func run() throws {
        let known = RunDocument.knownStatuses
        for status in statuses where !known.contains(status) {
            throw CLIFailure.usage("unknown status '\(status)'; one of \(known.sorted().joined(separator: ", "))")
        }
        if let limit, limit < 1 { throw CLIFailure.usage("--limit takes a number of runs from 1, not \(limit)") }
        let selection = RunSelection(statuses: Set(statuses), labels: try InputParsing.labels(labels),
                                     queues: queues.isEmpty ? nil : Set(queues), workflow: workflow, idPrefixes: ids, limit: limit)
        let documents = try remote.reader(global).runs(selection, transfer: global.json)
        if global.json {
            for run in documents { Terminal.line(run.jsonText) }
            return
        }
        let runs = documents.map(Terminal.shown)
        // A header row names the columns, when there is a row to name (no runs: no output).
        let idWidth = runs.map { ($0["id"]?.stringValue ?? "").count }.max() ?? 0
        func row(_ id: String, _ status: String, _ workflow: String, _ created: String, _ queue: String, _ node: String) -> String {
            "\(id.padding(idWidth))  \(status.padding(12)) \(workflow.padding(20)) \(created.padding(19))  \(queue.padding(10)) \(node)"
        }
        if !runs.isEmpty { Terminal.line(row("ID", "STATUS", "WORKFLOW", "CREATED", "QUEUE", "NODE")) }
        for run in runs {
            func text(_ key: String) -> String { run[key]?.stringValue ?? "" }
            Terminal.line(row(text("id"), text("status"), text("workflow"), RunDisplay.time(run["created_at"]?.doubleValue),
                              text("queue"), run["node"]?.stringValue ?? "-"))
        }
    }
}
