import Foundation
import OrchestrateStore

/// Commits a run's journal rounds on another thread while the scheduling loop prepares the
/// next round: in a fan-out the loop handles the completions that arrive during a commit
/// instead of waiting for SQLite (the commit was two thirds of the loop's work per item).
///
/// The journal's promise is kept: a round's `afterCommit` (telling the observer, starting the
/// round's attempts) runs only once the commit holding the round has returned. Rounds are
/// committed in the order they were submitted; the rounds queued while a commit is under way
/// are committed together, in one transaction, in that order (group commit). A step's success
/// is therefore never durable later than the start of a step that follows it.
///
/// A failed commit stops the pipeline: that round and every later one are neither committed
/// nor acted on, and `failed` hears of the error (the loop throws it). `abandon` drops what is
/// not committed yet when the loop stops for a reason of its own.
///
/// Thread-safe. The writer runs on a thread `startWriter` provides (the run's attempt threads)
/// for as long as rounds are queued.
final class JournalPipeline: @unchecked Sendable {
    private struct Round {
        let batch: JournalBatch
        let afterCommit: () -> Void
    }

    private let store: any StateStore
    private let startWriter: (@escaping @Sendable () -> Void) -> Void
    private let committed: (_ seconds: Double) -> Void
    private let failed: (any Error) -> Void

    private let condition = NSCondition()
    private var queued: [Round] = []
    /// A writer is under way: it empties `queued` before it ends.
    private var writing = false
    /// Set by a failed commit or by `abandon`: nothing more is committed.
    private var stopped = false

    /// - Parameters:
    ///   - startWriter: runs the writer's job on a thread of its own.
    ///   - committed: after each commit, with the time it took (on the writer's thread).
    ///   - failed: the error of a failed commit (on the writer's thread).
    init(store: any StateStore, startWriter: @escaping (@escaping @Sendable () -> Void) -> Void,
         committed: @escaping (_ seconds: Double) -> Void, failed: @escaping (any Error) -> Void)
    {
        self.store = store
        self.startWriter = startWriter
        self.committed = committed
        self.failed = failed
    }

    /// Nothing is queued or being committed.
    var isIdle: Bool { condition.withLock { !writing } }

    /// Queues `batch` for a commit after the rounds already queued; `afterCommit` runs on the
    /// writer's thread once it is durable. A round that deletes steps cannot be queued (a
    /// group's deletions would follow all of its upserts; the executor never deletes).
    func submit(_ batch: JournalBatch, afterCommit: @escaping () -> Void) {
        precondition(batch.deletedSteps.isEmpty && !batch.releasesRun, "a pipelined round neither deletes nor releases")
        let startsWriter = condition.withLock { () -> Bool in
            guard !stopped else { return false }
            queued.append(Round(batch: batch, afterCommit: afterCommit))
            guard !writing else { return false }
            writing = true
            return true
        }
        if startsWriter { startWriter { [self] in write() } }
    }

    /// Waits until every round submitted so far is committed and acted on, or dropped after a
    /// failure.
    func waitUntilIdle() {
        condition.withLock { while writing { condition.wait() } }
    }

    /// Drops the rounds not committed yet (neither committed nor acted on) and waits for a
    /// commit under way to end. Later submissions are dropped too.
    func abandon() {
        condition.withLock {
            stopped = true
            queued.removeAll()
            while writing { condition.wait() }
        }
    }

    private func write() {
        while let rounds = takeQueued() {
            var group = rounds[0].batch
            for round in rounds.dropFirst() { group.append(round.batch) }
            do {
                let started = Monotonic.now()
                try store.commit(group)
                committed(Monotonic.now() - started)
            } catch {
                condition.withLock { stopped = true }
                failed(error)
                continue  // `takeQueued` ends the writer
            }
            for round in rounds { round.afterCommit() }
        }
    }

    /// The rounds to commit next, or nil (the writer ends) when none are left or the pipeline
    /// stopped.
    private func takeQueued() -> [Round]? {
        condition.withLock {
            guard !queued.isEmpty, !stopped else {
                queued.removeAll()
                writing = false
                condition.broadcast()
                return nil
            }
            defer { queued.removeAll(keepingCapacity: true) }
            return queued
        }
    }
}

extension JournalBatch {
    /// Adds `later`'s writes after this batch's, for one transaction: each table's rows are
    /// written in the order two commits one after the other would write them, so the result is
    /// the same (`deletedSteps` aside: a store deletes after all of a batch's upserts).
    mutating func append(_ later: JournalBatch) {
        runUpdates += later.runUpdates
        stepUpserts += later.stepUpserts
        events += later.events
        releasedLeases += later.releasedLeases
        deletedSteps += later.deletedSteps
        releasesRun = releasesRun || later.releasesRun
        fence = fence ?? later.fence
    }
}
