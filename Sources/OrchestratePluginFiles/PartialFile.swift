#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import OrchestratePluginKit

/// A file being written beside its destination under a temporary name, renamed into place only
/// when complete, so the destination is always absent, the old file, or the whole new file.
///
/// The durability promise every plugin keeps through this type:
/// - the bytes written survive a `kill -9` (the next attempt reopens the partial file and resumes
///   from what it holds: `size`, or a checkpointed offset it truncates back to);
/// - `commit()` makes the content durable (fsync), renames it atomically onto the destination,
///   and makes the rename durable (fsync of the directory; a failure of either is an error);
/// - memory stays flat: callers stream through `write(_:at:)`.
///
/// ```swift
/// let partial = try PartialFile(for: destination, naming: .suffix, keeping: .all)
/// var offset = partial.size                       // resume from what is on disk
/// try partial.write(bytes, at: offset)           // as the bytes arrive (any thread, any range)
/// try partial.commit()                           // fsync, rename, fsync the directory
/// ```
public final class PartialFile: @unchecked Sendable {
    /// Where the temporary file lives; both are beside the destination (the same filesystem, so
    /// the rename is atomic).
    public enum Naming: Sendable {
        /// `NAME.partial` (fs, sftp).
        case suffix
        /// `.NAME.part`, hidden from listings (http).
        case hiddenPart

        /// The temporary path for `destination`.
        public func path(for destination: String) -> String {
            switch self {
            case .suffix: return destination + ".partial"
            case .hiddenPart:
                let directory = LocalPath.parent(of: destination)
                return (directory == "/" ? "" : directory) + "/." + LocalPath.name(of: destination) + ".part"
            }
        }
    }

    /// What an opened partial file keeps of an earlier attempt's bytes.
    public enum Keep: Sendable {
        /// Everything on disk (resume from `size`).
        case all
        /// Nothing: truncated to 0.
        case nothing
        /// The first N bytes (a checkpointed offset; anything after it is unconfirmed).
        case prefix(Int64)
    }

    public let destination: String
    public let path: String
    /// The open temporary file (for reading back what was written: hashing, re-hashing on resume).
    public let file: LocalFile
    private let writeBack: WriteBack

    /// Opens (creating it if needed) the temporary file for `destination`. The destination's
    /// directory must exist (see `LocalPath.makeDirectories`).
    public init(for destination: String, naming: Naming, keeping keep: Keep) throws(StepError) {
        self.destination = destination
        path = naming.path(for: destination)
        let truncate: Int32 = if case .nothing = keep { O_TRUNC } else { 0 }
        file = try LocalFile(path: path, flags: O_RDWR | O_CREAT | truncate)
        writeBack = WriteBack(fd: file.fd)
        if case .prefix(let length) = keep { try file.truncate(to: length) }
    }

    deinit { writeBack.drain() }  // no flush may outlive the descriptor

    /// The bytes on disk now: where a resume continues.
    public var size: Int64 { file.size }

    /// Writes all of `bytes` at `offset`. Safe from several threads writing different ranges.
    public func write(_ bytes: UnsafeRawBufferPointer, at offset: Int64) throws(StepError) {
        try file.write(bytes, at: offset)
        writeBack.wrote(bytes.count)
    }

    /// Drops everything written (the source changed, a range was refused): start over at 0.
    public func startOver() throws(StepError) {
        writeBack.drain()
        try file.truncate(to: 0)
        writeBack.reset()
    }

    /// fsync of what was written so far, for callers that checkpoint an offset: a checkpoint
    /// must never claim bytes a crash could still lose.
    public func sync() throws(StepError) { try file.sync() }

    /// Completes the file: fsync, atomic rename onto the destination, fsync of the directory.
    /// After it returns, the destination survives a power cut.
    public func commit() throws(StepError) {
        writeBack.drain()
        try file.sync()
        try LocalPath.rename(path, to: destination)
        try LocalPath.syncDirectory(LocalPath.parent(of: destination))
    }

    /// Deletes the temporary file (a checksum mismatch: nothing half-written stays behind).
    public func discard() throws(StepError) { try LocalPath.remove(path) }
}
