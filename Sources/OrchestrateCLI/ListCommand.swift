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
        for run in runs {
            if global.json {
                Terminal.line(run.jsonText)
            } else {
                func text(_ key: String) -> String { run[key]?.stringValue ?? "" }
                Terminal.line("\(text("id"))  \(text("status").padding(12)) \(text("workflow").padding(20)) "
                    + "\(RunDisplay.time(run["created_at"]?.doubleValue))  \(text("queue").padding(10)) \(run["node"]?.stringValue ?? "-")")
            }
        }
    }
}
