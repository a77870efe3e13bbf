#if canImport(Glibc)
import Glibc
#endif
import Dispatch
import OrchestrateDigest
import OrchestratePluginFiles
import OrchestratePluginKit
import Synchronization

/// The SHA-256 of a download, computed on another thread from the bytes already written (read
/// back from the page cache), so the transfer thread only writes.
final class TrailingHash: @unchecked Sendable {
    private let file: LocalFile
    private let queue = DispatchQueue(label: "orchestrate.http.hash")
    // Touched on `queue` only.
    private var hash = SHA256()
    private var hashed: Int64 = 0
    // Touched on the caller's thread only.
    private var dispatched: Int64 = 0
    /// Set by `stop`: the work queued is dropped, the chunk being hashed is the last.
    private let stopped = Atomic<Bool>(false)
    private static let step: Int64 = 8 << 20

    init(file: LocalFile) { self.file = file }

    /// The file now holds `offset` valid bytes from 0: hash them, later.
    func advance(to offset: Int64) {
        if offset - dispatched >= Self.step { dispatch(to: offset) }
    }

    /// Forgets everything (the file was truncated to start over).
    func reset() {
        queue.sync {
            hash = SHA256()
            hashed = 0
        }
        dispatched = 0
    }

    /// Hashes up to `offset`, waits, and returns the hex digest.
    func finish(at offset: Int64) -> String {
        dispatch(to: offset)
        return queue.sync { hash.finish() }
    }

    /// Ends the hashing of an attempt that will not `finish` (it failed or was cancelled):
    /// what is queued is dropped and this returns once the chunk being hashed is done, so no
    /// thread of the step goes on reading its file (and hashing, with the next attempt's hash
    /// beside it) after the step returned.
    func stop() {
        stopped.store(true, ordering: .relaxed)
        queue.sync {}
    }

    private func dispatch(to offset: Int64) {
        dispatched = offset
        queue.async { [self] in
            // A read error cannot happen while the file only grows; the digest would then differ
            // from the expected one, or be reported for what was read.
            _ = try? file.readChunks(from: hashed, to: offset) { (bytes, at) throws(StepError) in
                if stopped.load(ordering: .relaxed) { throw StepError.cancelled() }
                hash.update(bytes)
                hashed = at + Int64(bytes.count)
            }
        }
    }
}
