import ArgumentParser
import Foundation
import OrchestrateStore

struct EventsCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "events",
        abstract: "Print the journaled events of a run (or of all runs) as JSON lines.",
        discussion: """
            Events are durable: a watcher that starts late sees the whole history, then new ones with --follow. \
            --after SEQ resumes after the last seq seen. If retention pruned events after that seq \
            (finished runs past their period), a warning says up to which seq, and the \
            `runs.pruned` events in what follows name the runs removed; a run followed by id that \
            is pruned or deleted meanwhile ends the command with status 1.

            Examples:
              orchestrate events RUN
              orchestrate events --follow | jq -c 'select(.type == "step.failed")'
              orchestrate events --follow --after 48213         # resume where a watcher stopped
              orchestrate events RUN --follow --server https://bay-1:8080 --token-file ~/.orchestrate-token
            """)

    @Argument(help: "The run id (default: every run).")
    var runID: String?

    @Flag(help: "Keep printing new events as they are journaled.")
    var follow = false

    @Option(help: ArgumentHelp("Only events with a seq above this (the last one seen).", valueName: "seq"))
    var after: Int64 = 0

    @OptionGroup var global: GlobalOptions
    @OptionGroup var remote: RemoteOptions

    func validate() throws {
        if after < 0 { throw ValidationError("--after must be an event seq (0 or more)") }
    }

    func run() throws {
        let reader = try remote.reader(global)
        if let runID { try RunArgument.check(runID, reader: reader) }
        var after = self.after
        if after > 0 {
            let through = try reader.prunedThrough()
            if after < through {
                Terminal.warning("events of finished runs pruned by retention, up to seq \(through), are gone: "
                    + "the runs.pruned events below name those runs; continuing after seq \(after) with what remains")
            }
        }
        while true {
            let events = try reader.events(runID: runID, after: after, limit: 1000)
            for event in events { Terminal.line(event.jsonText) }
            after = events.last?["seq"]?.intValue ?? after
            if events.count == 1000 { continue }
            if !follow { return }
            if let runID, events.isEmpty {
                if try reader.isFinished(runID) { return }
                if try reader.detail(runID) == nil {
                    throw CLIFailure(status: ExitStatus.runFailed, message: "run \(runID) is gone (deleted, or pruned by retention)")
                }
            }
            Thread.sleep(forTimeInterval: 0.2)
        }
    }
}
