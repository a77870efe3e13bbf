#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import CPluginFiles
import Dispatch
import OrchestratePluginKit

/// Early write-back of a file being written: after every `step` bytes, the dirty pages are
/// written to disk on a background queue (one at a time; a step passed while one runs is folded
/// into the next), so the disk writes alongside the network and the fsync before the final
/// rename waits for the last few MiB instead of the whole file. Only a speed-up: durability comes
/// from that fsync. `sync_file_range`, not `fdatasync`: an fdatasync also commits the journal
/// and flushes the disk's cache, which on a virtual disk can cost more than the write itself.
///
/// Thread-safe: the ranges of one file may be written by several threads.
final class WriteBack: @unchecked Sendable {
    /// Bytes written between two flushes.
    static let step: Int64 = 64 << 20

    private let fd: Int32
    private let queue = DispatchQueue(label: "orchestrate.files.writeback")
    private let lock = Lock()
    private var unflushed: Int64 = 0
    private var running = false

    init(fd: Int32) { self.fd = fd }

    /// `count` more bytes were written.
    func wrote(_ count: Int) {
        let start = lock.withLock { () -> Bool in
            unflushed += Int64(count)
            guard unflushed >= Self.step, !running else { return false }
            unflushed = 0
            running = true
            return true
        }
        guard start else { return }
        queue.async { [self] in
            _ = orc_write_back(fd)
            lock.withLock { running = false }
        }
    }

    /// Waits for a running flush (before the final fsync, and before the descriptor is closed).
    func drain() { queue.sync {} }

    /// Forgets the count (the file was truncated to start over).
    func reset() { lock.withLock { unflushed = 0 } }
}
