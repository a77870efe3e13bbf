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
            """)

    @Argument(help: "The run id (default: every run).")
    var runID: String?

    @Flag(help: "Keep printing new events as they are journaled.")
    var follow = false

    @OptionGroup var global: GlobalOptions

    func run() throws {
        let store = try global.openStore()
        var after: Int64 = 0
        while true {
            let events = try store.events(runID: runID, afterSeq: after, limit: 1000)
            for event in events { Terminal.line(event.json.jsonText) }
            after = events.last?.seq ?? after
            if events.count == 1000 { continue }
            if !follow { return }
            if let runID, let run = try store.run(runID), run.status.isFinished, events.isEmpty { return }
            Thread.sleep(forTimeInterval: 0.2)
        }
    }
}
