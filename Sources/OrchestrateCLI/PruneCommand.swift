import ArgumentParser
import Foundation
import OrchestrateEngine
import OrchestrateJSON
import OrchestrateOperations
import OrchestrateStore

struct PruneCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "prune",
        abstract: "Remove finished runs older than a period, with their events, items and run directories.",
        discussion: """
            Only finished runs (succeeded, failed, cancelled) are removed, never a run that is \
            queued, running, paused or interrupted. Each goes with its steps, attempts, events, \
            items, checkpoints and its run directory on this node (with the directories here of \
            runs pruned or deleted by other nodes); schedules and watch-folder \
            hand-offs stay, so a schedule never fires a due time twice and a file is never handed \
            over twice while it is in the folder (the hand-off of a file that `after:` deleted or \
            moved away goes with its run). A `runs.pruned` event names the runs removed. Without --older-than, each \
            run's own retention applies (what `serve` prunes every minute: the workflow's \
            `retention:`, else `queue retention`, else 30 days).

            A SQLite store made before retention existed keeps its file size (its free pages are \
            reused): --vacuum rewrites it once (stop serve first on a large store: every writer \
            waits meanwhile) so that pruning gives space back from then on.

            Examples:
              orchestrate prune --older-than 30d --dry-run
              orchestrate prune --older-than 7d --status failed --status cancelled
              orchestrate prune                         # each run's own retention
              orchestrate prune --older-than 90d --vacuum
            """)

    @Option(name: .customLong("older-than"), help: ArgumentHelp("Finished longer ago than this (30d, 12h, 90m), whatever their retention.", valueName: "period"))
    var olderThan: String?

    @Option(name: .customLong("status"), help: ArgumentHelp("Only runs that ended so: succeeded, failed or cancelled (repeatable).", valueName: "status"))
    var statuses: [String] = []

    @Flag(name: .customLong("dry-run"), help: "List what would be removed; change nothing.")
    var dryRun = false

    @Flag(name: .customLong("vacuum"), help: "SQLite: switch a store made before retention to incremental vacuum (one full VACUUM).")
    var vacuum = false

    @OptionGroup var global: GlobalOptions

    func validate() throws {
        if let olderThan { _ = try RetentionPeriod.seconds(olderThan, allowOff: false) }
        _ = try chosenStatuses()
        if vacuum && dryRun { throw ValidationError("--vacuum changes the store; it does not go with --dry-run") }
    }

    private func chosenStatuses() throws -> Set<RunStatus> {
        guard !statuses.isEmpty else { return PruneRule.finishedStatuses }
        return Set(try statuses.map { text in
            guard let status = RunStatus(rawValue: text), status.isFinished else {
                throw ValidationError("--status \(text): only finished runs are pruned (succeeded, failed or cancelled)")
            }
            return status
        })
    }

    func run() throws {
        let store = try global.openStore()
        let sqlite = store as? SQLiteStateStore
        if vacuum {
            if let sqlite {
                if try sqlite.enableIncrementalVacuum() { Terminal.line("state.sqlite now gives freed space back (incremental vacuum)", to: .standardError) }
            } else {
                Terminal.warning("--vacuum is for a SQLite store: PostgreSQL's autovacuum reclaims pruned rows")
            }
        }
        var rule = PruneRule(settings: try store.retentionSettings(), statuses: try chosenStatuses())
        rule.olderThan = try olderThan.map { try RetentionPeriod.seconds($0, allowOff: false) }
        let before = try sqlite?.databaseBytes()
        var report = try RetentionPruner.prune(store: store, rule: rule, stateDirectory: global.resolvedStateDirectory(),
                                               dryRun: dryRun)
        if !dryRun {
            // What other nodes pruned: their directories here go too.
            let swept = try RunDirectorySweeper.sweep(store: store, stateDirectory: global.resolvedStateDirectory())
            report.directoriesRemoved += swept.removed.count
            report.failures += swept.failures
            if let refused = swept.refused { Terminal.warning(refused) }
        }
        if global.json {
            Terminal.line(JSONValue.object([
                "dry_run": .bool(dryRun),
                "runs": .array(report.runs.map { .object(["id": .string($0.id), "status": .string($0.status.rawValue),
                                                          "queue": .string($0.queue)]) }),
                "directories_removed": .int(Int64(report.directoriesRemoved)),
                "longest_write_ms": .int(Int64((report.longestWrite * 1000).rounded())),
            ]).jsonText)
        } else if dryRun {
            for run in report.runs { Terminal.line("would prune \(run.id)  \(run.status.rawValue)  finished \(Self.iso(run.finishedAt))") }
            Terminal.line("\(report.runs.count) finished run(s) would be pruned (--dry-run: nothing changed)")
        } else {
            Terminal.line("pruned \(report.runs.count) finished run(s); \(report.directoriesRemoved) run directory(ies) removed"
                + (report.runs.isEmpty ? "" : "; longest write \(Int((report.longestWrite * 1000).rounded())) ms"))
        }
        for failure in report.failures { Terminal.warning("could not remove \(failure)") }
        if let sqlite, !dryRun, !report.runs.isEmpty {
            if try sqlite.vacuumsIncrementally(), let before {
                let after = try sqlite.databaseBytes()
                Terminal.line("state.sqlite: \(before / 1024) KiB -> \(after / 1024) KiB", to: .standardError)
            } else {
                Terminal.line("state.sqlite keeps its size (its free pages are reused): `orchestrate prune --vacuum` once makes pruning give space back",
                              to: .standardError)
            }
        }
        if !report.failures.isEmpty { throw CLIFailure(status: ExitStatus.runFailed, message: "") }
    }

    static func iso(_ time: Double) -> String {
        let formatter = ISO8601DateFormatter()
        return formatter.string(from: Date(timeIntervalSince1970: time))
    }
}
