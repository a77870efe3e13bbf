import Foundation
import OrchestrateLock

/// Which stores have run directories in a node's runs folder (`runs/` under `--state`): one
/// store id a line in `runs/.orchestrate-stores`. A store's id is added before its first run
/// directory is made there, so two stores sharing one folder (two `--store`s given the same
/// `--state`) both show. The sweep of gone runs' directories (`RunDirectorySweeper`) removes
/// directories only in a folder that lists its own store alone.
///
/// Neither file here is followed through a symbolic link, and the list is read no further than
/// `maximumBytes`.
public enum RunsFolderOwners {
    public static let fileName = ".orchestrate-stores"
    /// Far more than any real list (a few 37-byte lines).
    static let maximumBytes = 64 * 1024

    public static func folder(stateDirectory: String) -> String { stateDirectory + "/runs" }

    /// Folders this process has already listed a store id in ("FOLDER\nID").
    private static let registered = Registered()

    private final class Registered: @unchecked Sendable {
        let lock = Lock()
        var entries: Set<String> = []  // guarded by lock
    }

    /// Adds `storeID` to the list of `stateDirectory`'s runs folder unless it is there, making
    /// the folder (0700) if needed. Once per folder and store in a process.
    public static func register(_ storeID: String, stateDirectory: String) throws {
        let folder = folder(stateDirectory: stateDirectory)
        let key = folder + "\n" + storeID
        if registered.lock.withLock({ registered.entries.contains(key) }) { return }
        if mkdir(folder, 0o700) != 0 && errno != EEXIST {
            if errno != ENOENT { throw OwnersError(path: folder, reason: String(cString: strerror(errno))) }
            do {
                try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true,
                                                        attributes: [.posixPermissions: 0o700])
            } catch {
                throw OwnersError(path: folder, reason: (error as NSError).localizedDescription)
            }
        }
        if try !read(folder: folder).contains(storeID) {
            let path = folder + "/" + fileName
            let fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0o600)
            guard fd >= 0 else { throw OwnersError(path: path, reason: String(cString: strerror(errno))) }
            defer { close(fd) }
            // One write of one short line with O_APPEND: lines of processes writing at once
            // never interleave.
            let line = Array((storeID + "\n").utf8)
            guard write(fd, line, line.count) == line.count else {
                throw OwnersError(path: path, reason: String(cString: strerror(errno)))
            }
        }
        registered.lock.withLock { _ = registered.entries.insert(key) }
    }

    /// The store ids listed in `folder` (none when there is no list yet). A list that is not a
    /// regular file (a symbolic link planted there), or is too long, is an error.
    public static func read(folder: String) throws -> Set<String> {
        let path = folder + "/" + fileName
        let fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
        guard fd >= 0 else {
            if errno == ENOENT { return [] }
            throw OwnersError(path: path, reason: String(cString: strerror(errno)))
        }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else {
            throw OwnersError(path: path, reason: "not a regular file")
        }
        guard info.st_size <= maximumBytes else { throw OwnersError(path: path, reason: "longer than \(maximumBytes) bytes") }
        var bytes = [UInt8](repeating: 0, count: Int(info.st_size) + 1)
        var filled = 0
        while filled < bytes.count {
            let got = bytes.withUnsafeMutableBytes { Foundation.read(fd, $0.baseAddress! + filled, $0.count - filled) }
            if got < 0 && errno == EINTR { continue }
            guard got >= 0 else { throw OwnersError(path: path, reason: String(cString: strerror(errno))) }
            if got == 0 { break }
            filled += got
        }
        let text = String(decoding: bytes[..<filled], as: UTF8.self)
        return Set(text.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty })
    }

    public struct OwnersError: Error, CustomStringConvertible {
        public let path: String
        public let reason: String
        public var description: String { "\(path): \(reason)" }
    }
}
