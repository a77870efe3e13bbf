import Foundation

/// Folds the journal commits that many threads of one process make at the same moment into
/// one database transaction: group commit, done by the client.
///
/// Every run executor commits its round and waits for it to be durable before acting on it.
/// Thirty-two runs on one worker would otherwise be thirty-two transactions, each with its own
/// WAL write (and fsync, where the store asks for one), and on PostgreSQL its round trips and
/// turn at the event-order lock. Both stores use it. Here the first caller becomes the
/// *leader*: it takes every batch waiting (its own first) and writes them with `write`, while
/// the batches that arrive in the meantime wait for the next group. When a group is written,
/// the oldest waiting caller leads the next one, so no caller serves others for long.
///
/// Each caller still returns only once its own batch is durable (or gets its own error): the
/// promise "journaled before acted on" is unchanged; only the transaction is shared.
final class CommitGroup<Work>: @unchecked Sendable {
    /// Writes a group in one transaction; returns one outcome per piece of work, in order.
    typealias Write = ([Work]) -> [Result<Void, any Error>]

    private final class Entry {
        let work: Work
        /// Set (under `lock`) before `woken` is signalled.
        var outcome: Result<Void, any Error>?
        var leads = false
        /// Signalled once, when the entry's outcome is known or it is to lead: each caller is
        /// woken for its own news only, not every waiting caller at each group's end.
        let woken = DispatchSemaphore(value: 0)
        init(_ work: Work) { self.work = work }
    }

    private let lock = NSLock()
    private var waiting: [Entry] = []
    private var leaderActive = false
    private let maxBatches: Int
    private let write: Write

    /// - Parameter maxBatches: the most pieces of work one transaction carries (bounds its size and
    ///   how long its leader is kept from its own run).
    init(maxBatches: Int = 64, write: @escaping Write) {
        self.maxBatches = maxBatches
        self.write = write
    }

    /// Commits `work` together with whatever other threads commit at the same time; returns
    /// when it is durable, throws its own error.
    func commit(_ work: Work) throws {
        let entry = Entry(work)
        let leads = lock.withLock {
            waiting.append(entry)
            if leaderActive { return false }
            leaderActive = true
            entry.leads = true
            return true
        }
        if !leads {
            entry.woken.wait()
            if let outcome = lock.withLock({ entry.outcome }) { return try outcome.get() }
        }
        // Leading: this entry is the oldest waiting one, so it is in the group.
        let group = lock.withLock {
            let group = Array(waiting.prefix(maxBatches))
            waiting.removeFirst(group.count)
            return group
        }

        let outcomes = write(group.map(\.work))

        let next: Entry? = lock.withLock {
            for (member, outcome) in zip(group, outcomes) { member.outcome = outcome }
            if let next = waiting.first {
                next.leads = true
                return next
            }
            leaderActive = false
            return nil
        }
        next?.woken.signal()
        for member in group where member !== entry { member.woken.signal() }
        return try entry.outcome!.get()
    }
}
