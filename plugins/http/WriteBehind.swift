#if canImport(Glibc)
import Glibc
#endif
import Dispatch
import OrchestrateDigest

/// Work done behind a download's writes, on other threads, so the transfer thread only writes:
/// the SHA-256 of the bytes already written (read back from the page cache), and early
/// write-back (fdatasync every 64 MiB), so the final fsync before the atomic rename waits for
/// the last few MiB instead of the whole file.
final class WriteBehind: @unchecked Sendable {
    private let fd: Int32
    private let hashQueue = DispatchQueue(label: "orchestrate.http.hash")
    private let syncQueue = DispatchQueue(label: "orchestrate.http.writeback")
    // Touched on hashQueue only.
    private var hash = SHA256()
    private var hashed: Int64 = 0
    // Touched on the caller's thread only.
    private var dispatchedHash: Int64 = 0
    private var dispatchedSync: Int64 = 0
    private static let hashStep: Int64 = 8 << 20
    private static let syncStep: Int64 = 64 << 20

    init(fd: Int32) { self.fd = fd }

    /// The file now holds `offset` valid bytes from 0: hash them and start write-back, later.
    func advance(to offset: Int64) {
        if offset - dispatchedHash >= Self.hashStep { dispatchHash(to: offset) }
        if offset - dispatchedSync >= Self.syncStep {
            dispatchedSync = offset
            syncQueue.async { [fd] in _ = fdatasync(fd) }
        }
    }

    /// Forgets everything (the file was truncated to start over).
    func reset() {
        hashQueue.sync {
            hash = SHA256()
            hashed = 0
        }
        dispatchedHash = 0
        dispatchedSync = 0
    }

    /// Hashes up to `offset`, waits for the background work, and returns the hex digest.
    func finish(at offset: Int64) -> String {
        dispatchHash(to: offset)
        syncQueue.sync {}
        return hashQueue.sync { hash.finish() }
    }

    private func dispatchHash(to offset: Int64) {
        dispatchedHash = offset
        hashQueue.async { [self] in
            let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 1 << 20, alignment: 16)
            defer { buffer.deallocate() }
            while hashed < offset {
                let n = pread(fd, buffer.baseAddress!, Int(min(Int64(buffer.count), offset - hashed)), off_t(hashed))
                if n < 0 && errno == EINTR { continue }
                guard n > 0 else { return }  // cannot happen while the file only grows; finish() re-checks the size
                hash.update(UnsafeRawBufferPointer(rebasing: buffer[0..<n]))
                hashed += Int64(n)
            }
        }
    }
}
