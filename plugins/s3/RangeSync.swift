import Dispatch
import OrchestratePluginFiles
import OrchestratePluginKit

/// The fsyncs that make a download's ranges durable before the checkpoint lists them, on a
/// thread of their own: the thread that drives the transfers only says which ranges are
/// written. A range is durable once an fsync that began after it was written has returned;
/// `onDurable` is then told, on this type's thread (one call at a time), and journals it.
///
/// The durable points are coarse: an fsync once `syncBytes` more are written, or `maxDelay`
/// after the oldest range not yet durable was written, whichever comes first, and at `drain`.
/// Every fsync flushes the disk's cache and commits the filesystem's journal, which costs
/// more than the bytes; a kill -9 costs at most the ranges of one interval again.
final class RangeSync: @unchecked Sendable {
    static let syncBytes: Int64 = 64 << 20
    static let maxDelay: DispatchTimeInterval = .seconds(1)

    private let file: LocalFile
    private let onDurable: ([Int]) -> Void
    private let queue = DispatchQueue(label: "orchestrate.s3.range-sync")
    // Under `lock`.
    private let lock = Lock()
    private var written: [Int] = []
    private var writtenBytes: Int64 = 0
    /// An fsync is queued or runs.
    private var running = false
    /// The `maxDelay` timer of the oldest range not durable is armed.
    private var timerArmed = false
    private var failure: StepError?

    /// `onDurable` runs on this type's thread, never beside the owner's use of what it touches
    /// once `drain` has returned.
    init(file: LocalFile, onDurable: @escaping ([Int]) -> Void) {
        self.file = file
        self.onDurable = onDurable
    }

    /// Range `index` (`length` bytes) is wholly written: it is made durable soon.
    func wrote(_ index: Int, length: Int64) {
        let (start, arm) = lock.withLock { () -> (Bool, Bool) in
            written.append(index)
            writtenBytes += length
            if writtenBytes >= Self.syncBytes && !running {
                running = true
                return (true, false)
            }
            guard !timerArmed else { return (false, false) }
            timerArmed = true
            return (false, true)
        }
        if start { queue.async { [self] in syncOnce() } }
        if arm {
            queue.asyncAfter(deadline: .now() + Self.maxDelay) { [self] in
                let due = lock.withLock { () -> Bool in
                    timerArmed = false
                    guard !running, !written.isEmpty else { return false }
                    running = true
                    return true
                }
                if due { syncOnce() }
            }
        }
    }

    /// Throws the error of an fsync that failed (the disk is gone or full).
    func check() throws(StepError) {
        if let failed = lock.withLock({ failure }) { throw failed }
    }

    /// Makes every range written durable and journaled (or an fsync failed: `check` says), and
    /// returns once no fsync runs.
    func drain() {
        queue.sync { [self] in
            let due = lock.withLock { () -> Bool in
                guard !written.isEmpty else { return false }
                running = true
                return true
            }
            if due { syncOnce() }
        }
    }

    /// One fsync for what is written now, on `queue`; then `onDurable`.
    private func syncOnce() {
        let batch = lock.withLock { () -> [Int]? in
            defer {
                written = []
                writtenBytes = 0
            }
            return written.isEmpty || failure != nil ? nil : written
        }
        if let batch {
            do throws(StepError) {
                try file.sync()
                onDurable(batch)
            } catch {
                lock.withLock { failure = error }
            }
        }
        lock.withLock { running = false }
    }
}
