#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import OrchestrateExactPath
import OrchestratePluginKit

/// What a transfer step does with a destination file that already exists (`if_exists`), as
/// rclone chooses: replace it, keep it, or replace it only when it differs from the source.
public enum IfExists: String, Sendable, CaseIterable, InputEnum {
    /// Send the file again and replace the destination.
    case overwrite
    /// Keep any existing destination file, whatever it holds.
    case skip
    /// Keep the destination when its size and modification time (to the second) are the
    /// source's; replace it otherwise.
    case ifDifferent = "if-different"

    /// Nanoseconds since the epoch, rounded down to whole seconds.
    public static func seconds(_ nanoseconds: Int64) -> Int64 {
        nanoseconds >= 0 ? nanoseconds / 1_000_000_000 : (nanoseconds - 999_999_999) / 1_000_000_000
    }

    /// Whether an existing destination of `size` bytes modified at `modified` (seconds since the
    /// epoch, nil when unknown) stays as it is, for a source of `sourceSize` bytes modified at
    /// `sourceModified`. An unknown time on either side counts as different.
    public func keeps(size: Int64, modified: Int64?, sourceSize: Int64, sourceModified: Int64?) -> Bool {
        switch self {
        case .overwrite: return false
        case .skip: return true
        case .ifDifferent:
            guard let modified, let sourceModified else { return false }
            return size == sourceSize && modified == sourceModified
        }
    }
}

extension FileInfo {
    /// The modification time in whole seconds since the epoch (what SFTP v3 and HTTP carry).
    public var modifiedSeconds: Int64 { IfExists.seconds(mtimeNanoseconds) }
}

extension LocalFile {
    /// Sets the file's modification time (and its access time, to the same instant), as `touch -d`
    /// or `cp -p` do, through the open descriptor: set on a partial before its rename, it is the
    /// destination's once renamed (a rename keeps it).
    public func setModificationTime(nanoseconds: Int64) throws(StepError) {
        var seconds = nanoseconds / 1_000_000_000, rest = nanoseconds % 1_000_000_000
        if rest < 0 { seconds -= 1; rest += 1_000_000_000 }
        let time = timespec(tv_sec: time_t(seconds), tv_nsec: Int(rest))
        var times = (time, time)
        let result = withUnsafePointer(to: &times) { $0.withMemoryRebound(to: timespec.self, capacity: 2) { futimens(fd, $0) } }
        guard result == 0 else { throw .posix("cannot set the modification time of \(path)") }
    }
}

extension LocalFile {
    /// The open file's modification time in nanoseconds since the epoch (fstat: the file read,
    /// even if its path was replaced since).
    public var modifiedNanoseconds: Int64 {
        var st = stat()
        guard fstat(fd, &st) == 0 else { return 0 }
        #if canImport(Darwin)
        return Int64(st.st_mtimespec.tv_sec) * 1_000_000_000 + Int64(st.st_mtimespec.tv_nsec)
        #else
        return Int64(st.st_mtim.tv_sec) * 1_000_000_000 + Int64(st.st_mtim.tv_nsec)
        #endif
    }
}

extension LocalPath {
    /// `path` made absolute against the current directory (a checkpoint's `partial` is read by
    /// the engine, which removes only absolute paths).
    public static func absolute(_ path: String) -> String {
        guard !PathBytes.isAbsolute(path), let cwd = getcwd(nil, 0) else { return path }
        defer { free(cwd) }
        return String(cString: cwd) + "/" + path
    }
}
