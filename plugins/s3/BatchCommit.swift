import Dispatch
import OrchestratePluginFiles
import OrchestratePluginKit

/// The commits of a tree's small files (verified, in their `.NAME.part`), in batches on threads
/// of their own, so the thread that drives the transfers never waits for a disk. A batch is
/// every file verified since the last one began: each file's content fsynced (`syncWidth` at
/// once: the filesystem's journal folds fsyncs that wait together into one commit), then each
/// renamed into place, then each folder of the batch fsynced once. Only then is `onCommitted`
/// told the batch's files (on this type's thread, one call at a time), so a checkpoint that
/// lists them never claims a file a crash could lose, and lags the disk by milliseconds.
/// At most `maxPending` files wait (their descriptors are open): `submit` waits beyond that.
final class BatchCommit: @unchecked Sendable {
    static let syncWidth = 4
    static let maxPending = 256

    private let queue = DispatchQueue(label: "orchestrate.s3.batch-commit")
    private let syncers = (0 ..< BatchCommit.syncWidth).map { DispatchQueue(label: "orchestrate.s3.batch-commit.sync-\($0)") }
    private let room = DispatchSemaphore(value: BatchCommit.maxPending)
    private let onCommitted: ([Int]) -> Void
    // Under `lock`.
    private let lock = Lock()
    private var pending: [(index: Int, partial: PartialFile)] = []
    private var failure: StepError?
    private var running = false
    private var abandoned = false

    /// `onCommitted` runs on this type's thread; once `drain` or `abandon` has returned, never
    /// again.
    init(onCommitted: @escaping ([Int]) -> Void) { self.onCommitted = onCommitted }

    /// File `index` is verified in `partial`: it is committed soon. Waits while `maxPending`
    /// files wait already.
    func submit(_ index: Int, _ partial: PartialFile) {
        room.wait()
        let start = lock.withLock { () -> Bool in
            pending.append((index, partial))
            guard !running else { return false }
            running = true
            return true
        }
        if start { queue.async { [self] in commitLoop() } }
    }

    /// Throws the failure of a commit (the files of that batch and after it are not committed,
    /// their partial files removed).
    func check() throws(StepError) {
        if let failed = lock.withLock({ failure }) { throw failed }
    }

    /// Waits until every file submitted is committed (or a commit failed).
    func drain() { queue.sync {} }

    /// The step failed or was cancelled: the files not committed yet are not, their partial
    /// files removed; returns once no commit runs.
    func abandon() {
        lock.withLock { abandoned = true }
        queue.sync {}
    }

    private func commitLoop() {
        while true {
            let batch = lock.withLock { () -> [(index: Int, partial: PartialFile)]? in
                if pending.isEmpty {
                    running = false
                    return nil
                }
                defer { pending = [] }
                return pending
            }
            guard let batch else { return }
            let stop = lock.withLock { failure != nil || abandoned }
            if stop {
                for file in batch { try? file.partial.discard() }
            } else {
                do throws(StepError) {
                    try commit(batch.map(\.partial))
                    onCommitted(batch.map(\.index))
                } catch {
                    for file in batch { try? file.partial.discard() }
                    lock.withLock { failure = failure ?? error }
                }
            }
            for _ in batch { room.signal() }
        }
    }

    /// fsync of every file (several at once), renames, one fsync per folder.
    private func commit(_ files: [PartialFile]) throws(StepError) {
        let group = DispatchGroup()
        let failed = FirstFailure()
        for (k, partial) in files.enumerated() {
            syncers[k % syncers.count].async(group: group) {
                do throws(StepError) { try partial.makeDurable() } catch { failed.record(error) }
            }
        }
        group.wait()
        if let error = failed.error { throw error }
        // One fsync per folder, told apart by the folder itself (its descriptor's device and
        // inode), not by a path that could name another by now.
        var folders: [PartialFile] = []
        var seen = Set<PartialFile.FolderIdentity>()
        for partial in files {
            try partial.moveIntoPlace()
            if seen.insert(partial.folderIdentity).inserted { folders.append(partial) }
        }
        for partial in folders { try partial.syncFolder() }
    }
}

/// The first error of work spread over several threads.
private final class FirstFailure: @unchecked Sendable {
    private let lock = Lock()
    private var first: StepError?

    func record(_ error: StepError) { lock.withLock { first = first ?? error } }
    var error: StepError? { lock.withLock { first } }
}
