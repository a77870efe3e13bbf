import Dispatch
import OrchestratePluginFiles
import OrchestratePluginKit

/// The digests of a file being written in ranges that complete out of order, computed on a
/// thread of its own from the bytes already written (read back, from the page cache), as the
/// written prefix grows: when the last range lands, only the tail is left to hash, not the
/// whole file. Which digests (`Digests`) is the caller's choice.
final class PrefixHash: @unchecked Sendable {
    private let file: LocalFile
    private let step: StepContext
    private let queue = DispatchQueue(label: "orchestrate.s3.prefix-hash")
    // On `queue` only.
    private let digests: Digests
    private var hashed: Int64 = 0
    /// One read buffer for the whole file (one per read would stay in the thread's heap).
    private let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: LocalFile.chunkSize, alignment: 4096)
    // Under `lock`.
    private let lock = Lock()
    private var failure: StepError?
    private var stopped = false
    // The owner's thread only.
    private var dispatched: Int64 = 0
    /// Less than this is not worth a wake-up of the hashing thread.
    private static let step: Int64 = 4 << 20

    init(file: LocalFile, digests: Digests, step: StepContext) {
        self.file = file
        self.step = step
        self.digests = digests
    }

    deinit { buffer.deallocate() }

    /// The file now holds the object's bytes from 0 to `offset`: hash them, later.
    func advance(to offset: Int64) {
        if offset - dispatched >= Self.step { dispatch(to: offset) }
    }

    /// Hashes up to `size`, waits, and returns the digests; a read that failed on the way is
    /// the error.
    func finish(at size: Int64) throws(StepError) -> Digests.Sums {
        dispatch(to: size)
        let result = queue.sync { [self] in (digests.finish(), hashed) }
        if let failure = lock.withLock({ failure }) { throw failure }
        guard result.1 == size else {
            throw .permanent("\(file.path) shrank while it was hashed (\(result.1) of \(size) bytes)", code: "file_changed")
        }
        return result.0
    }

    /// Drops what is queued and returns once the hashing thread is idle (a failed or cancelled
    /// attempt): no thread of the step reads its file after the step returned.
    func stop() {
        lock.withLock { stopped = true }
        queue.sync {}
    }

    private func dispatch(to offset: Int64) {
        guard offset > dispatched else { return }
        dispatched = offset
        queue.async { [self] in
            guard lock.withLock({ !stopped && failure == nil }), hashed < offset else { return }
            do throws(StepError) {
                while hashed < offset {
                    if lock.withLock({ stopped }) { throw .cancelled("hashing stopped") }
                    let want = Int(min(Int64(buffer.count), offset - hashed))
                    let n = try file.read(into: UnsafeMutableRawBufferPointer(rebasing: buffer[0 ..< want]), at: hashed)
                    if n == 0 { break }  // shorter than said: finish reports it
                    digests.update(UnsafeRawBufferPointer(rebasing: buffer[0 ..< n]))
                    hashed += Int64(n)
                }
            } catch {
                lock.withLock { failure = failure ?? error }
            }
        }
    }
}
