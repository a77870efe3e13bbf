#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import OrchestrateExactPath
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
/// The temporary file sits in the destination's directory, which others may share: it is never
/// opened through a symbolic link (`O_NOFOLLOW`), is created anew (`O_EXCL`) with mode 0600,
/// and an existing one is resumed only if it is a regular file of the current user with no
/// other link; anything else there (a link planted towards a victim file, another user's file)
/// is removed — the entry, never what it points to — and a new file made. The destination gets
/// its mode at the rename (`commit(mode:)`), so nobody reads the bytes while they arrive.
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
        /// The first N bytes, or fewer if the file holds fewer (a checkpointed offset; anything
        /// after it is unconfirmed). Callers resume from `size`.
        case prefix(Int64)
    }

    public let destination: String
    public let path: String
    /// The open temporary file (for reading back what was written: hashing, re-hashing on resume).
    public let file: LocalFile
    private let writeBack: WriteBack
    /// The destination's folder (`O_PATH`), reached by `OwnLinksOpen`: the temporary file is
    /// made, renamed and removed relative to it, so a folder swapped for a link after the open
    /// changes nothing.
    private let folder: Int32
    private let name: [UInt8], partialName: [UInt8]

    /// Which folder the destination's is (device and inode), for callers that rename many
    /// files and fsync each folder once (`syncFolder`).
    public struct FolderIdentity: Hashable, Sendable {
        let device: UInt64, inode: UInt64
    }

    public var folderIdentity: FolderIdentity {
        var info = stat()
        _ = fstat(folder, &info)
        return FolderIdentity(device: UInt64(info.st_dev), inode: UInt64(info.st_ino))
    }

    /// Opens (creating it if needed) the temporary file for `destination`. The destination's
    /// directory must exist (see `LocalPath.makeDirectories`).
    public init(for destination: String, naming: Naming, keeping keep: Keep) throws(StepError) {
        guard !PathBytes.endsWithSlash(destination) else {
            throw .invalidInput("destination \(destination) ends with /: name the file to write")
        }
        self.destination = destination
        path = naming.path(for: destination)
        name = Array(LocalPath.name(of: destination).utf8)
        partialName = Array(LocalPath.name(of: path).utf8)
        folder = try OwnLinksOpen.folder(LocalPath.parent(of: destination), creating: false)
        do {
            file = try Self.openPrivately(partialName, in: folder, path: path)
        } catch {
            close(folder)
            throw error
        }
        writeBack = WriteBack(fd: file.fd)
        // Only a file that holds more is cut: ext4 marks a file truncated to 0 bytes, even one
        // already empty, and its close then pushes every page written since to the disk (0.39 s
        // for 1 GiB, where the fsync before the rename has usually done it already).
        let keptLength: Int64
        switch keep {
        case .all: keptLength = file.size
        case .nothing: keptLength = 0
        case .prefix(let length): keptLength = min(length, file.size)  // never extended: a new file is empty
        }
        if keptLength < file.size { try file.truncate(to: keptLength) }
    }

    /// Opens the temporary file as the type's comment says: ours, regular, single-linked, 0600.
    private static func openPrivately(_ name: [UInt8], in folder: Int32, path: String) throws(StepError) -> LocalFile {
        let cName = name.map { CChar(bitPattern: $0) } + [0]
        for _ in 0..<3 {
            // O_NONBLOCK: a FIFO planted under the name must not hang the open.
            let fd = openat(folder, cName, O_RDWR | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
            if fd >= 0 {
                var info = stat()
                if fstat(fd, &info) == 0, info.st_mode & S_IFMT == S_IFREG, info.st_uid == geteuid(), info.st_nlink == 1 {
                    _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK)
                    guard fchmod(fd, 0o600) == 0 else {
                        let number = errno
                        close(fd)
                        throw .posix("cannot make \(path) private", errno: number)
                    }
                    return LocalFile(adopting: fd, path: path)
                }
                close(fd)
            } else if errno == ENOENT {
                let created = openat(folder, cName, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
                if created >= 0 { return LocalFile(adopting: created, path: path) }
                if errno != EEXIST { throw .posix("cannot create \(path)") }
                continue  // made by someone else between the two opens: look again
            } else if errno != ELOOP && errno != EMLINK {  // ELOOP (EMLINK on BSDs): a symbolic link
                throw .posix("cannot open \(path)")
            }
            // A symbolic link, another user's file, a hard link or not a file: not ours to write.
            guard unlinkat(folder, cName, 0) == 0 || errno == ENOENT else {
                throw .posix("\(path) is a symbolic link, another user's file or not a regular file, and cannot be removed")
            }
        }
        throw .permanent("\(path) was replaced again each time it was removed (a symbolic link or another user's file); "
            + "is someone else writing in \(LocalPath.parent(of: path))?", code: "partial_file_replaced")
    }

    /// The mode a destination gets when the step does not choose one: a new file's, 0644 less
    /// the process's umask (read from /proc: `umask()` would change it for every thread).
    public static let defaultMode: mode_t = {
        var umask: mode_t = 0o022
        if let status = try? LocalFile(path: "/proc/self/status", flags: O_RDONLY) {
            var bytes = [UInt8](repeating: 0, count: 4096)
            let n = bytes.withUnsafeMutableBytes { (try? status.read(into: $0, at: 0)) ?? 0 }
            let text = String(decoding: bytes[0..<n], as: UTF8.self)
            if let line = text.split(separator: "\n").first(where: { $0.hasPrefix("Umask:") }),
               let value = mode_t(String(line.dropFirst("Umask:".count).filter { $0 != " " && $0 != "\t" }), radix: 8)
            {
                umask = value
            }
        }
        return 0o644 & ~umask
    }()

    deinit {
        writeBack.drain()  // no flush may outlive the descriptor
        close(folder)
    }

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

    /// Completes the file: its mode (`mode`, else `defaultMode`; the file was 0600 until now),
    /// fsync, atomic rename onto the destination, fsync of the directory. After it returns, the
    /// destination survives a power cut.
    public func commit(mode: mode_t? = nil) throws(StepError) {
        try makeDurable(mode: mode)
        try moveIntoPlace()
        try syncFolder()
    }

    /// fsync of the destination's folder, the one the rename happened in (by its descriptor:
    /// the folder the file is in, whatever its path names now).
    public func syncFolder() throws(StepError) {
        try LocalPath.syncFolder(folder, shown: LocalPath.parent(of: destination))
    }

    /// The first half of a commit made in batches (many files, one directory fsync): the mode
    /// and the fsync of the content.
    public func makeDurable(mode: mode_t? = nil) throws(StepError) {
        writeBack.drain()
        file.setPermissions(mode ?? Self.defaultMode)
        try file.sync()
    }

    /// The second half, after `makeDurable`: the atomic rename onto the destination. The rename
    /// is durable only once the caller has fsynced the directory (`syncFolder`), which it must
    /// do before it claims the file anywhere (a checkpoint). Refused when the destination's
    /// path no longer names the folder the file was written in (moved, or swapped for a link):
    /// the step's outputs would name a file that is not there.
    public func moveIntoPlace() throws(StepError) {
        var now = stat()
        let directory = LocalPath.parent(of: destination)
        guard stat(directory, &now) == 0, FolderIdentity(device: UInt64(now.st_dev), inode: UInt64(now.st_ino)) == folderIdentity else {
            throw .permanent("\(directory) was moved or replaced while \(destination) was written; the file stays as \(path) "
                + "in the folder that was moved", code: "destination_moved")
        }
        let from = partialName.map { CChar(bitPattern: $0) } + [0], to = name.map { CChar(bitPattern: $0) } + [0]
        guard renameat(folder, from, folder, to) == 0 else { throw .posix("cannot rename \(path) to \(destination)") }
    }

    /// Deletes the temporary file (a checksum mismatch: nothing half-written stays behind).
    public func discard() throws(StepError) {
        if unlinkat(folder, partialName.map { CChar(bitPattern: $0) } + [0], 0) != 0 && errno != ENOENT { throw .posix("cannot remove \(path)") }
    }
}
