import Dispatch
import OrchestratePluginFiles
import OrchestratePluginKit

/// The fsyncs that make a download's ranges durable before the checkpoint lists them, on a
/// thread of their own: the thread that drives the transfers only says which ranges are
/// written and takes the ones an fsync has covered since. A range counts as durable once an
/// fsync that began after it was written has returned; ranges written while one runs wait for
/// the next (one at a time, each covering everything written before it began).
final class RangeSync: @unchecked Sendable {
    private let file: LocalFile
    private let queue = DispatchQueue(label: "orchestrate.s3.range-sync")
    // Under `lock`.
    private let lock = Lock()
    private var written: [Int] = []
    private var durable: [Int] = []
    private var running = false
    private var failure: StepError?

    init(file: LocalFile) { self.file = file }

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

    /// The ranges made durable since the last call; an fsync that failed is the error.
    func takeDurable() throws(StepError) -> [Int] {
        let (taken, failed) = lock.withLock { () -> ([Int], StepError?) in
            defer { durable = [] }
            return (durable, failure)
        }
        if let failed { throw failed }
        return taken
    }

    /// Waits for the fsync running, if any (and the ones it chains).
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
                lock.withLock { durable.append(contentsOf: batch) }
            } catch {
                lock.withLock { failure = error }
            }
        }
    }
}
