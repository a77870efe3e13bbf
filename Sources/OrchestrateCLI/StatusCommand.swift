import ArgumentParser
import Foundation
import OrchestrateEngine
import OrchestrateJSON
import OrchestrateOperations
import OrchestrateStore

struct StatusCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "status",
        abstract: "Show a run: its state, each step's state and attempts, errors and outputs.",
        discussion: """
            A run whose process died shows as `interrupted`: continue it with `orchestrate resume RUN`. \
            The files of a persistent session are counted by state, and the last --items of them \
            (20) are listed; --items-after CURSOR lists those after a cursor, page by page. \
            With --watch the status is redrawn every second, with a progress bar per step that \
            reports progress, until the run finishes (Ctrl-C to stop watching). With --server URL \
            --token-file FILE it reads a remote `serve --http` instead of the store.

            Examples:
              orchestrate status RUN --watch
              orchestrate status RUN --json | jq .outputs
              orchestrate status RUN --server https://bay-1:8080 --token-file ~/.orchestrate-token
            """)

    @Argument(help: "The run id.")
    var runID: String

    @Flag(help: "Redraw every second until the run finishes.")
    var watch = false

    @Option(help: ArgumentHelp("List this many files of persistent sessions (0 to \(ItemWindow.maxLimit); 0: the counts only).",
                               valueName: "n"))
    var items = 20

    @Option(name: .customLong("items-after"), help: ArgumentHelp(
        "List the files after this cursor (a page's `next page` line, or `items_next` in --json), not the last ones.",
        valueName: "cursor"))
    var itemsAfter: String?

    @OptionGroup var global: GlobalOptions
    @OptionGroup var remote: RemoteOptions

    func validate() throws {
        guard (0...ItemWindow.maxLimit).contains(items) else { throw ValidationError("--items must be 0 to \(ItemWindow.maxLimit)") }
        if let itemsAfter, ItemCursor(text: itemsAfter) == nil {
            throw ValidationError("--items-after takes a cursor as status prints it (SEQ:STEP), not '\(itemsAfter)'")
        }
    }

    /// The files listed: those after --items-after, else the last --items.
    private var window: ItemWindow {
        itemsAfter.flatMap(ItemCursor.init(text:)).map { ItemWindow(limit: items, after: $0) } ?? ItemWindow(limit: items, last: true)
    }

    func run() throws {
        let reader = try remote.reader(global)
        try RunArgument.check(runID, reader: reader)
        guard try reader.detail(runID) != nil else { throw CLIFailure.usage("no run \(runID) in \(reader.location)") }
        guard watch else { return try show(reader) }
        while true {
            if Terminal.stdoutIsTTY { Terminal.write("\u{1B}[H\u{1B}[2J") }
            try show(reader)
            if try reader.isFinished(runID) { return }
            if !Terminal.stdoutIsTTY { Terminal.line("") }
            Thread.sleep(forTimeInterval: Terminal.stdoutIsTTY ? 1 : 2)
        }
    }

    /// Prints the run from its detail document (`RunDocument.detail`, which the API serves too).
    private func show(_ reader: any RunReader) throws {
        guard let document = try reader.detail(runID, items: window) else { throw CLIFailure.usage("run \(runID) was deleted") }
        if global.json { return Terminal.line(document.jsonText) }
        let run = Terminal.shown(document)
        let status = run["status"]?.stringValue ?? "?"
        Terminal.line(Terminal.styled("run \(runID)", .bold) + "  \(status)")
        Terminal.line("workflow  \(run["workflow"]?.stringValue ?? "") (\(run["file"]?.stringValue ?? ""))")
        var placement = "queue     \(run["queue"]?.stringValue ?? "")"
        if let owner = run["owner"], let node = owner["node"]?.stringValue { placement += "   held by node \(node) (pid \(owner["pid"]?.intValue ?? 0))" }
        Terminal.line(placement)
        func time(_ key: String) -> String { RunDisplay.time(run[key]?.doubleValue) }
        Terminal.line("created   \(time("created_at"))   started \(time("started_at"))   finished \(time("finished_at"))")
        if let labels = run["labels"]?.objectValue, !labels.isEmpty {
            Terminal.line("labels    " + labels.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value.stringValue ?? "")" }.joined(separator: " "))
        }
        if let rate = run["max_rate"]?.intValue { Terminal.line("max rate  " + ProgressFormat.bytes(rate) + "/s") }
        if let timetable = run["max_rate_timetable"]?.stringValue { Terminal.line("max rate  \(timetable)") }
        if let error = run["error"]?.stringValue { Terminal.line("error     \(error)") }
        if let stats = run["transfer"].map(RunDisplay.transferStatistics), stats.bytesDone > 0 || stats.bytesTotal != nil {
            Terminal.line("transfer  \(RunDisplay.describe(stats))")
        }
        Terminal.line("")
        let steps = run["steps"]?.arrayValue ?? []  // in the order they started
        for step in steps {
            let stepStatus = step["status"]?.stringValue ?? ""
            var line = "  \((step["id"]?.stringValue ?? "").padding(24)) \(stepStatus.padding(13)) attempt \(step["attempt"]?.intValue ?? 0)"
            if let node = step["node"]?.stringValue { line += " on \(node)" }
            if let message = step["error"]?.stringValue, stepStatus != StepStatus.succeeded.rawValue {
                line += "  \(step["error_kind"]?.stringValue ?? "error"): \(message)"
            }
            Terminal.line(line)
            if let partial = step["partial"]?.stringValue { Terminal.line("  \("".padding(24)) partial file \(partial) (kept for a resume)") }
        }
        // Every step's counts, then the window's files under their step (by step, in the order added).
        let listed = run["items"]?.arrayValue ?? []
        let counts = run["item_counts"]?.objectValue ?? [:]
        for step in Set(counts.keys).union(listed.compactMap { $0["step"]?.stringValue }).sorted() {
            let stepCounts = counts[step]?.objectValue ?? [:]
            let states = ["queued", "running"] + ItemRecord.Status.allCases.map(\.rawValue).filter { $0 != "queued" }
            Terminal.line("\nfiles of \(step): " + states.map { "\(stepCounts[$0]?.intValue ?? 0) \($0)" }.joined(separator: ", "))
            for item in listed where item["step"]?.stringValue == step {
                let value = item["item"]
                let source = value?["source"]?.stringValue ?? value?.stringValue ?? value?.jsonText ?? ""
                var line = "  \((item["id"]?.stringValue ?? "").padding(16)) \((item["status"]?.stringValue ?? "").padding(7)) \(source)"
                if let error = item["error"]?.stringValue { line += "  \(error)" }
                if let done = item["bytes_done"]?.intValue {
                    // A file being moved: "12.0 MiB / 150.0 MiB  20.0 MiB/s".
                    line += "  " + ProgressFormat.describe(ProgressSnapshot(
                        bytesDone: done, bytesTotal: item["bytes_total"]?.intValue ?? -1, filesDone: -1, filesTotal: -1,
                        rate: item["rate"]?.doubleValue ?? 0))
                }
                Terminal.line(line)
            }
        }
        let total = run["items_total"]?.intValue ?? 0
        if let next = run["items_next"]?.stringValue {
            Terminal.line("  next page: orchestrate status \(runID) --items \(max(1, items)) --items-after \(next)")
        } else if itemsAfter == nil && total > Int64(listed.count) {
            Terminal.line("  (the last \(listed.count) of \(total) files; page through them with --items N --items-after 0:\(counts.keys.sorted().first ?? "STEP"))")
        }
        if watch && status == RunStatus.running.rawValue {  // no bars (nor ETAs) for a run not running
            let running = Set(steps.filter { $0["status"]?.stringValue == StepStatus.running.rawValue }.compactMap { $0["id"]?.stringValue })
            let bars = (run["progress"]?.arrayValue ?? []).filter { running.contains($0["step"]?.stringValue ?? "") }
            if !bars.isEmpty { Terminal.line("") }
            for event in bars {
                let d = event["data"] ?? [:]
                let snapshot = ProgressSnapshot(bytesDone: d["bytes_done"]?.intValue ?? -1, bytesTotal: d["bytes_total"]?.intValue ?? -1,
                                                filesDone: d["files_done"]?.intValue ?? -1, filesTotal: d["files_total"]?.intValue ?? -1,
                                                rate: d["rate"]?.doubleValue ?? 0)
                Terminal.line(Terminal.styled(ProgressBoard.line(event["step"]?.stringValue ?? "", snapshot, width: Terminal.width), .cyan))
            }
        }
        if let outputs = run["outputs"]?.objectValue, !outputs.isEmpty {
            Terminal.line("\noutputs")
            for key in outputs.keys.sorted() { Terminal.line("  \(key): \(outputs[key]!.interpolated)") }
        }
    }
}
