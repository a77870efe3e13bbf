import Dispatch
import OrchestratePluginFiles
import OrchestratePluginKit

/// The fsyncs that make a download's ranges durable before the checkpoint lists them, on a
/// thread of their own: the thread that drives the transfers only says which ranges are
/// written. A range is durable once an fsync that began after it was written has returned;
/// `onDurable` is then told, on this type's thread (one call at a time), and journals it.
/// Ranges written while an fsync runs wait for the next (one at a time, each covering
/// everything written before it began).
final class RangeSync: @unchecked Sendable {
    private let file: LocalFile
    private let onDurable: ([Int]) -> Void
    private let queue = DispatchQueue(label: "orchestrate.s3.range-sync")
    // Under `lock`.
    private let lock = Lock()
    private var written: [Int] = []
    private var running = false
    private var failure: StepError?

    /// `onDurable` runs on this type's thread, never beside the owner's use of what it touches
    /// once `drain` has returned.
    init(file: LocalFile, onDurable: @escaping ([Int]) -> Void) {
        self.file = file
        self.onDurable = onDurable
    }

    /// Range `index` is wholly written: it is made durable soon.
    func wrote(_ index: Int) {
        let start = lock.withLock { () -> Bool in
            written.append(index)
            guard !running else { return false }
            running = true
            return true
        }
        if start { queue.async { [self] in syncLoop() } }
    }

    /// Throws the error of an fsync that failed (the disk is gone or full).
    func check() throws(StepError) {
        if let failed = lock.withLock({ failure }) { throw failed }
    }

    /// Waits until no fsync runs and every range written is durable and journaled (or an fsync
    /// failed: `check` says).
    func drain() { queue.sync {} }

    private func syncLoop() {
        while true {
            let batch = lock.withLock { () -> [Int]? in
                if written.isEmpty || failure != nil {
                    running = false
                    return nil
                }
                defer { written = [] }
                return written
            }
            guard let batch else { return }
            do throws(StepError) {
                try file.sync()
                onDurable(batch)
            } catch {
                lock.withLock { failure = error }
            }
        }
    }
}
