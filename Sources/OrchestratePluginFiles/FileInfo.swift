#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import OrchestratePluginKit

/// What `stat(2)` says about a path (symbolic links followed).
public struct FileInfo: Sendable {
    public let size: Int64
    public let mode: mode_t
    public let isDirectory: Bool
    public let isRegular: Bool
    public let mtimeNanoseconds: Int64
    public let device: UInt64

    /// The path's status, or nil when it does not exist; other failures (EACCES, ELOOP…) throw.
    public static func of(_ path: String) throws(StepError) -> FileInfo? {
        var s = stat()
        guard stat(path, &s) == 0 else {
            if errno == ENOENT || errno == ENOTDIR { return nil }
            throw .posix("cannot stat \(path)")
        }
        let type = s.st_mode & S_IFMT
        #if canImport(Darwin)
        let mtime = Int64(s.st_mtimespec.tv_sec) * 1_000_000_000 + Int64(s.st_mtimespec.tv_nsec)
        #else
        let mtime = Int64(s.st_mtim.tv_sec) * 1_000_000_000 + Int64(s.st_mtim.tv_nsec)
        #endif
        return FileInfo(size: Int64(s.st_size), mode: s.st_mode, isDirectory: type == S_IFDIR,
                        isRegular: type == S_IFREG, mtimeNanoseconds: mtime, device: UInt64(s.st_dev))
    }
}
