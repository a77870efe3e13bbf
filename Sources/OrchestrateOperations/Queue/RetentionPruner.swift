import Foundation
import OrchestrateEngine
import OrchestrateExactPath
import OrchestrateLock
import OrchestratePluginHost
import OrchestrateStore

/// Removes finished runs past their retention (docs/durability.md#retention): `serve` runs
/// one on a thread of its own, `orchestrate prune` calls `prune` by hand.
///
/// A batch of runs per transaction (`batchSize`), a pause between batches, and the freed pages
/// given back a few at a time: the journal's writer (the engine's commits) waits at most one
/// small batch, never the whole backlog.
public final class RetentionPruner: @unchecked Sendable {
    public struct Report: Sendable {
        /// Removed (or, for a dry run, that would be).
        public var runs: [PrunableRun] = []
        public var directoriesRemoved = 0
        /// Run directories that could not be removed, with why.
        public var failures: [String] = []
        /// The longest single write: a batch's transaction, or a reclaim of pages (seconds).
        /// What another writer of the store waited at worst.
        public var longestWrite: Double = 0
    }

    /// Runs per transaction: about a few milliseconds of writer time each on SQLite (bench/scale).
    public static let batchSize = 100
    /// Pages given back per short write (4 MiB at SQLite's page size).
    static let reclaimPages = 1024

    /// Prunes what `rule` selects, oldest first, a batch per transaction, then removes each
    /// run's directory from this node's `stateDirectory`. A dry run changes nothing and lists
    /// every run it would remove.
    public static func prune(store: any StateStore, rule: PruneRule, stateDirectory: String, dryRun: Bool = false,
                             batchSize: Int = batchSize, pause: Double = 0, shouldStop: () -> Bool = { false }) throws -> Report
    {
        var report = Report()
        if dryRun {
            report.runs = try store.prunableRuns(rule, limit: Int(Int32.max))
            return report
        }
        while !shouldStop() {
            let batch = try store.prunableRuns(rule, limit: batchSize)
            if batch.isEmpty { break }
            var started = Date()
            let pruned = try store.pruneRuns(batch.map(\.id))
            report.longestWrite = max(report.longestWrite, Date().timeIntervalSince(started))
            report.runs += pruned
            for run in pruned {
                do {
                    if try removeRunDirectory(run, stateDirectory: stateDirectory) { report.directoriesRemoved += 1 }
                } catch {
                    report.failures.append("\(run.localRunDirectory(stateDirectory: stateDirectory)): \(error)")
                }
            }
            while true {
                started = Date()
                let more = try store.reclaimSpace(maxPages: reclaimPages)
                report.longestWrite = max(report.longestWrite, Date().timeIntervalSince(started))
                if !more || shouldStop() { break }
                if pause > 0 { Thread.sleep(forTimeInterval: pause) }
            }
            if batch.count < batchSize { break }
            if pause > 0 { Thread.sleep(forTimeInterval: pause) }
        }
        return report
    }

    /// Removes `runs/ID` under this node's state directory, where the executing node made it;
    /// false when there is none here (it never ran on this node, or had no files). A directory
    /// journaled anywhere else (an absolute path of an old version, a name that would climb
    /// out) is left alone, and a symbolic link in its place is removed, never followed.
    static func removeRunDirectory(_ run: PrunableRun, stateDirectory: String) throws -> Bool {
        let expected = RunRecord.runDirectory(for: run.id)
        let path = stateDirectory + "/" + expected
        // By bytes (PathBytes): a "/" a combining mark follows is one String character.
        guard !run.id.isEmpty, !PathBytes.contains(run.id, PathBytes.slash), !PathBytes.isDotOrDotDot(run.id),
              ExactPath(run.runDir) == ExactPath(expected) || ExactPath(run.runDir) == ExactPath(path)
        else { return false }
        var info = stat()
        guard lstat(path, &info) == 0 else { return false }
        if (info.st_mode & S_IFMT) != S_IFDIR {
            guard unlink(path) == 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
            return true
        }
        try FileManager.default.removeItem(atPath: path)
        return true
    }

    // MARK: serve's pruner

    public struct Options: Sendable {
        /// Between passes. `ORCHESTRATE_PRUNE_INTERVAL` (seconds) changes it, mainly for tests.
        public var interval: Double = 60
        /// Between batches of one pass: other writers get the store in between.
        public var pause: Double = 0.05
        public var stateDirectory: String = "."
        /// Prune runs past their retention (`serve --no-prune`: false). The run directories of
        /// runs gone from the store are swept either way (`RunDirectorySweeper`).
        public var prune = true
        public var log: @Sendable (String) -> Void = { _ in }
        public var warn: @Sendable (String) -> Void = { _ in }
        public init() {}
    }

    private let store: any StateStore
    private let options: Options
    private let state = MonotonicCondition()
    private var stopping = false  // guarded by state
    private var running = false  // guarded by state
    /// A refused runs folder is said once, not at every pass (only the pruner's thread).
    private var refusalWarned = false

    public init(store: any StateStore, options: Options) {
        self.store = store
        self.options = options
    }

    /// Starts the passes on a thread of their own: the first one at once.
    public func start() {
        state.withLock { running = true }
        let thread = Thread { [self] in loop() }
        thread.name = "retention pruner"
        thread.start()
    }

    /// Stops after the batch in progress; returns once the thread is done.
    public func shutdown() {
        state.withLock {
            stopping = true
            state.broadcast()
            while running { state.wait() }
        }
    }

    private var isStopping: Bool { state.withLock { stopping } }

    private func loop() {
        defer { state.withLock { running = false; state.broadcast() } }
        while !isStopping {
            pass()
            state.withLock {
                let until = MonotonicClock.nowSeconds() + options.interval
                while !stopping && MonotonicClock.nowSeconds() < until { _ = state.wait(seconds: until - MonotonicClock.nowSeconds()) }
            }
        }
    }

    /// One pass: every run past its retention, by the settings the store holds now, then the
    /// directories here of runs gone from the store.
    func pass() {
        if options.prune { prunePass() }
        if !isStopping { sweepPass() }
    }

    private func prunePass() {
        do {
            let rule = PruneRule(settings: try store.retentionSettings())
            let report = try Self.prune(store: store, rule: rule, stateDirectory: options.stateDirectory,
                                        pause: options.pause, shouldStop: { isStopping })
            if !report.runs.isEmpty {
                options.log("retention: pruned \(report.runs.count) finished run(s) and \(report.directoriesRemoved) run directory(ies)")
            }
            for failure in report.failures { options.warn("retention: could not remove \(failure)") }
        } catch {
            options.warn("retention: pruning failed (tried again in \(Int(options.interval)) s): \(error)")
        }
    }

    /// Names shown in the log line of a sweep; the rest are counted.
    static let namesLogged = 20

    private func sweepPass() {
        do {
            let report = try RunDirectorySweeper.sweep(store: store, stateDirectory: options.stateDirectory,
                                                       pause: options.pause, shouldStop: { isStopping })
            if let refused = report.refused {
                if !refusalWarned { options.warn("retention: \(refused)") }
                refusalWarned = true
            }
            if !report.removed.isEmpty {
                let shown = report.removed.prefix(Self.namesLogged).joined(separator: ", ")
                let more = report.removed.count > Self.namesLogged ? " and \(report.removed.count - Self.namesLogged) more" : ""
                options.log("retention: removed \(report.removed.count) run directory(ies) of runs no longer in the store: \(shown)\(more)")
            }
            for failure in report.failures { options.warn("retention: could not remove \(failure)") }
        } catch {
            options.warn("retention: sweeping run directories failed (tried again in \(Int(options.interval)) s): \(error)")
        }
    }
}
