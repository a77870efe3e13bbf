import OrchestrateLock

/// The saves of one attempt's checkpoint, coalesced: a save that arrives while another is being
/// written waits for that write, and then the newest of the saves waiting is written once for
/// all of them.
///
/// A checkpoint replaces the one before it, so of saves queued behind a write only the newest
/// needs to reach the store. A tree transfer saves one after every file from each of its workers;
/// with `ORCHESTRATE_SYNC=full` each write is an fsync, and writing them one by one held every
/// worker behind the disk. Each caller still returns only once its own data, or data saved
/// after it, is durable, which is what `save_checkpoint` promises when several threads of a
/// step save: the last save wins.
///
/// ```swift
/// let saves = CheckpointSaves()
/// let durable = saves.save(bytes) { newest in try store.saveCheckpoint(…, data: newest, …) }
/// ```
final class CheckpointSaves: @unchecked Sendable {
    private let condition = MonotonicCondition()
    /// Numbers the saves in the order they arrive.
    private var arrived = 0
    /// The newest save not yet being written, and its number.
    private var newest: (number: Int, data: [UInt8])?
    private var writing = false
    /// Every save numbered up to this one has its answer (written, or in `failed`).
    private var answeredThrough = 0
    /// Saves whose write failed, as ranges of their numbers, kept until no caller is waiting:
    /// consecutive failures merge, so a store that keeps failing keeps one range (only writes
    /// failing and succeeding by turns under saves that never stop add more).
    private var failed: [ClosedRange<Int>] = []
    /// Callers waiting for an answer, for pruning `failed`.
    private var waiting = 0
    private var writesMade = 0
    /// How many writes were made, for tests.
    var writes: Int { condition.withLock { writesMade } }
    /// How many callers are in `save` (the one writing included), for tests.
    var callers: Int { condition.withLock { waiting } }

    /// Saves `data` through `write` (called with the newest data waiting, never concurrently
    /// with itself); returns whether it, or a save that arrived after it, was written.
    func save(_ data: [UInt8], write: ([UInt8]) throws -> Void) -> Bool {
        condition.lock()
        defer { condition.unlock() }
        arrived += 1
        let mine = arrived
        newest = (mine, data)
        waiting += 1
        defer { waiting -= 1; if waiting == 0 { failed.removeAll() } }
        while answeredThrough < mine {
            if writing {
                condition.wait()
                continue
            }
            // Unreachable (a save not answered is waiting or being written); were it reached,
            // nothing was written for this save, so it is answered "not saved".
            guard let batch = newest else { return false }
            newest = nil
            writing = true
            condition.unlock()
            let written = (try? write(batch.data)) != nil
            condition.lock()
            writing = false
            writesMade += 1
            if !written {
                if let last = failed.last, last.upperBound == answeredThrough {
                    failed[failed.count - 1] = last.lowerBound ... batch.number
                } else {
                    failed.append(answeredThrough + 1 ... batch.number)
                }
            }
            answeredThrough = batch.number
            condition.broadcast()
        }
        return !failed.contains { $0.contains(mine) }
    }
}
