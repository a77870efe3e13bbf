import ArgumentParser
import Foundation
import OrchestrateStore

struct EventsCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "events",
        abstract: "Print the journaled events of a run (or of all runs) as JSON lines.",
        discussion: """
            Events are durable: a watcher that starts late sees the whole history, then new ones with --follow.

            Examples:
              orchestrate events RUN
              orchestrate events --follow | jq -c 'select(.type == "step.failed")'
              orchestrate events RUN --follow --server https://bay-1:8080 --token-file ~/.orchestrate-token
            """)

    @Argument(help: "The run id (default: every run).")
    var runID: String?

    @Flag(help: "Keep printing new events as they are journaled.")
    var follow = false

    @OptionGroup var global: GlobalOptions
    @OptionGroup var remote: RemoteOptions

    func run() throws {
        let reader = try remote.reader(global)
        if let runID { try RunArgument.check(runID, reader: reader) }
        var after: Int64 = 0
        while true {
            let events = try reader.events(runID: runID, after: after, limit: 1000)
            for event in events { Terminal.line(event.jsonText) }
            after = events.last?["seq"]?.intValue ?? after
            if events.count == 1000 { continue }
            if !follow { return }
            if let runID, events.isEmpty, try reader.isFinished(runID) { return }
            Thread.sleep(forTimeInterval: 0.2)
        }
    }
}
