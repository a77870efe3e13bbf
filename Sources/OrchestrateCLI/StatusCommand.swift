import ArgumentParser
import Foundation
import OrchestrateEngine
import OrchestrateJSON
import OrchestrateStore

struct StatusCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "status",
        abstract: "Show a run: its state, each step's state and attempts, errors and outputs.",
        discussion: """
            A run whose process died shows as `interrupted`: continue it with `orchestrate resume RUN`. \
            With --watch the status is redrawn every second, with a progress bar per step that \
            reports progress, until the run finishes (Ctrl-C to stop watching).

            Examples:
              orchestrate status RUN --watch
              orchestrate status RUN --json | jq .outputs
            """)

    @Argument(help: "The run id.")
    var runID: String

    @Flag(help: "Redraw every second until the run finishes.")
    var watch = false

    @OptionGroup var global: GlobalOptions

    func run() throws {
        let store = try global.openStore()
        guard try store.run(runID) != nil else { throw CLIFailure.usage("no run \(runID) in \(try global.storeLocation().redacted)") }
        guard watch else { return try show(store) }
        while true {
            if Terminal.stdoutIsTTY { Terminal.write("\u{1B}[H\u{1B}[2J") }
            try show(store)
            if let run = try store.run(runID), run.status.isFinished { return }
            if !Terminal.stdoutIsTTY { Terminal.line("") }
            Thread.sleep(forTimeInterval: Terminal.stdoutIsTTY ? 1 : 2)
        }
    }

    private func show(_ store: any StateStore) throws {
        guard let run = try store.run(runID) else { throw CLIFailure.usage("run \(runID) was deleted") }
        if global.json { return Terminal.line(try RunDocument.detail(run, store: store).jsonText) }
        let steps = try store.steps(ofRun: runID)
        let items = try RunDocument.sessionItems(of: runID, steps: steps, store: store)
        let stats = try TransferStatistics.of(run, store: store)
        Terminal.line(Terminal.styled("run \(run.id)", .bold) + "  \(RunDisplay.effectiveStatus(run))")
        Terminal.line("workflow  \(run.workflowName) (\(run.workflowFile))")
        var placement = "queue     \(run.queue)"
        if let owner = run.owner, run.ownerIsLive { placement += "   held by node \(owner.node) (pid \(owner.pid))" }
        Terminal.line(placement)
        Terminal.line("created   \(RunDisplay.time(run.createdAt))   started \(RunDisplay.time(run.startedAt))   finished \(RunDisplay.time(run.finishedAt))")
        if !run.labels.isEmpty { Terminal.line("labels    " + run.labels.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " ")) }
        if let rate = run.maxRate { Terminal.line("max rate  " + ProgressFormat.bytes(rate) + "/s") }
        if let timetable = run.maxRateTimetable { Terminal.line("max rate  \(timetable)") }
        if let error = run.error { Terminal.line("error     \(error)") }
        if stats.bytesDone > 0 || stats.bytesTotal != nil { Terminal.line("transfer  \(RunDisplay.describe(stats))") }
        Terminal.line("")
        for step in steps.sorted(by: RunDocument.stepOrder) {
            var line = "  \(step.id.padding(24)) \(step.status.rawValue.padding(13)) attempt \(step.attempt)"
            if let node = step.node { line += " on \(node)" }
            if let message = step.errorMessage, step.status != .succeeded { line += "  \(step.errorKind ?? "error"): \(message)" }
            Terminal.line(line)
        }
        for group in items {
            let counts = Dictionary(grouping: group.items, by: \.status).mapValues(\.count)
            Terminal.line("\nfiles of \(group.step): " + ItemRecord.Status.allCases.map { "\(counts[$0] ?? 0) \($0.rawValue)" }.joined(separator: ", "))
            for item in group.items {
                let value = try? JSONValue(parsing: item.json)
                var line = "  \(item.id.padding(16)) \(item.status.rawValue.padding(7)) \(value?["source"]?.stringValue ?? item.json)"
                if let error = item.error { line += "  \(error)" }
                Terminal.line(line)
            }
        }
        if watch && !run.status.isFinished {
            let running = Set(steps.filter { $0.status == .running }.map(\.id))
            let bars = try store.latestProgress(runID: runID).filter { running.contains($0.step ?? "") }
            if !bars.isEmpty { Terminal.line("") }
            for event in bars {
                let d = event.data
                let snapshot = ProgressSnapshot(bytesDone: d["bytes_done"]?.intValue ?? -1, bytesTotal: d["bytes_total"]?.intValue ?? -1,
                                                filesDone: d["files_done"]?.intValue ?? -1, filesTotal: d["files_total"]?.intValue ?? -1,
                                                rate: d["rate"]?.doubleValue ?? 0)
                Terminal.line(Terminal.styled(ProgressBoard.line(event.step ?? "", snapshot, width: Terminal.width), .cyan))
            }
        }
        if let outputs = run.outputs?.objectValue, !outputs.isEmpty {
            Terminal.line("\noutputs")
            for key in outputs.keys.sorted() { Terminal.line("  \(key): \(outputs[key]!.interpolated)") }
        }
    }
}
