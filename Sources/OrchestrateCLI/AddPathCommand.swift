import ArgumentParser
import Foundation
import OrchestrateEngine
import OrchestrateJSON
import OrchestrateOperations
import OrchestrateStore

struct AddPathCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "add-path",
        abstract: "Add a file to a running persistent session (e.g. sftp.accept-paths).",
        discussion: """
            The path is stored durably in the run's queue: the session transfers it while it runs, \
            and after a crash or a `resume` every path not yet finished is transferred. With \
            --from, every line is checked before any is added (a bad line adds nothing); the \
            paths are then journaled \(SessionPaths.batchSize) to a transaction, each batch \
            visible to the session at its commit, and printed once committed. Works \
            whether or not the run is executing right now, and from any machine sharing the \
            store: the node that holds the run takes the path, and SOURCE is a path on *that* \
            node (made absolute here only when the run is on this node).

            Examples:
              orchestrate add-path RUN ~/renders/a.mov incoming/a.mov
              find renders -name '*.mov' | jq -Rc '{source: ., destination: ("in/" + .)}' \\
                | orchestrate add-path RUN --from -
            """)

    @Argument(help: "The run id.")
    var runID: String

    @Argument(help: "The local file (made absolute).")
    var source: String?

    @Argument(help: "Where it goes, relative to the session's remote root.")
    var destination: String?

    @Option(help: "The session step (default: the run's only step that accepts paths).")
    var step: String?

    @Option(help: ArgumentHelp("Read paths as JSON lines {\"source\": …, \"destination\": …} from FILE, or - for stdin.",
                               valueName: "file"))
    var from: String?

    @OptionGroup var global: GlobalOptions

    func validate() throws {
        if from == nil && (source == nil || destination == nil) {
            throw ValidationError("give SOURCE and DESTINATION, or --from FILE")
        }
        if from != nil && (source != nil || destination != nil) {
            throw ValidationError("give either SOURCE and DESTINATION or --from, not both")
        }
    }

    func run() throws {
        let store = try global.openStore()
        let paths = SessionPaths(store: store, registry: global.loadPlugins(quiet: true))
        let target: (run: RunRecord, step: String)
        do { target = try paths.target(runID: runID, step: step) } catch let refusal as SessionPaths.Refusal {
            throw CLIFailure.usage(refusal.description)
        }
        var added = 0
        var batch: [(source: String, destination: String)] = []
        var given: [String] = []  // each SOURCE as given, for the text output
        batch.reserveCapacity(SessionPaths.batchSize)
        /// Journals the batch in one transaction, then prints its items (only once committed).
        func flush() throws {
            guard !batch.isEmpty else { return }
            let items = try paths.add(runID: runID, step: target.step, batch)
            for (i, item) in items.enumerated() {
                Terminal.line(global.json ? item.jsonText : "\(item["id"]?.stringValue ?? "") \(given[i]) -> \(batch[i].destination)")
            }
            added += items.count
            batch.removeAll(keepingCapacity: true)
            given.removeAll(keepingCapacity: true)
        }
        if let from {
            let lines = try PathLines(from: from)
            try lines.forEach { source, _ in try checkSource(source, run: target.run) }  // every line checked first
            try lines.forEach { source, destination in
                batch.append((try sourcePath(source, run: target.run), destination))
                given.append(source)
                if batch.count == SessionPaths.batchSize { try flush() }
            }
        } else {
            batch.append((try sourcePath(source!, run: target.run), destination!))
            given.append(source!)
        }
        try flush()
        if added == 0 { throw CLIFailure.usage("no paths given") }
    }

    /// SOURCE as the node holding the run will read it: made absolute against this directory,
    /// unless the run is held on another node, where this directory means nothing.
    private func sourcePath(_ path: String, run: RunRecord) throws -> String {
        try checkSource(path, run: run)
        return absolute(path)
    }

    /// Refuses a relative SOURCE for a run held by another node.
    private func checkSource(_ path: String, run: RunRecord) throws {
        if let owner = run.owner, run.ownerIsLive, owner.node != NodeName.current,
           !path.hasPrefix("/") && !path.hasPrefix("~")
        {
            throw CLIFailure.usage("run \(runID) is held by node \(owner.node): give SOURCE as an absolute path on that node, not '\(path)'")
        }
    }

    private func absolute(_ path: String) -> String {
        let expanded = (path as NSString).expandingTildeInPath
        let full = expanded.hasPrefix("/") ? expanded
            : (FileManager.default.currentDirectoryPath as NSString).appendingPathComponent(expanded)
        return (full as NSString).standardizingPath
    }
}
