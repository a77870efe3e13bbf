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

    @OptionGroup var global: GlobalOptions
    @OptionGroup var remote: RemoteOptions

    func run() throws {
        let known = RunDocument.knownStatuses
        for status in statuses where !known.contains(status) {
            throw CLIFailure.usage("unknown status '\(status)'; one of \(known.sorted().joined(separator: ", "))")
        }
        let reader = try remote.reader(global)
        let runs = try reader.runs(labels: try InputParsing.labels(labels), queues: queues.isEmpty ? nil : Set(queues), transfer: global.json)
            .filter { statuses.isEmpty || statuses.contains($0["status"]?.stringValue ?? "") }
            .filter { run in ids.isEmpty || ids.contains { (run["id"]?.stringValue ?? "").hasPrefix($0) } }
        if global.json {
            for run in runs { Terminal.line(run.jsonText) }
            return
        }
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
