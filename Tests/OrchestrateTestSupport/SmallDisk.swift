import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A full disk, for real, shared by the disk-full tests of the CLI and the plugins: a small
/// tmpfs mounted on a fresh directory (mounting needs root; CI runs as root), resized with a
/// remount, unmounted by `unmount()`.
///
/// ```swift
/// let disk = try SmallDisk(path, size: "4m")
/// defer { disk.unmount() }
/// try disk.resize("32m")
/// ```
public final class SmallDisk {
    /// A mount, a remount or the filler that did not work.
    public struct Failure: Error, CustomStringConvertible {
        public let description: String
        init(_ description: String) { self.description = description }
    }

    public let path: String
    public init(_ path: String, size: String) throws {
        self.path = path
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        let r = try ChildProcess.run(URL(fileURLWithPath: "/bin/mount"), ["-t", "tmpfs", "-o", "size=\(size),mode=0700", "tmpfs", path])
        guard r.status == 0 else { throw SmallDisk.Failure("mount tmpfs: \(r.stderr)") }
    }
    public func resize(_ size: String) throws {
        let r = try ChildProcess.run(URL(fileURLWithPath: "/bin/mount"), ["-o", "remount,size=\(size)", path])
        guard r.status == 0 else { throw SmallDisk.Failure("remount: \(r.stderr)") }
    }
    /// Fills the disk with a file until `leave` bytes are free.
    public func fill(leaving leave: Int) throws {
        var stats = statvfs()
        guard statvfs(path, &stats) == 0 else { throw SmallDisk.Failure("statvfs \(path)") }
        let free = Int(stats.f_bavail) * Int(stats.f_frsize)
        let filler = FileManager.default.createFile(atPath: "\(path)/filler", contents: Data(count: max(0, free - leave)))
        guard filler else { throw SmallDisk.Failure("cannot write the filler") }
    }
    public func unmount() { _ = try? ChildProcess.run(URL(fileURLWithPath: "/bin/umount"), ["-l", path]) }
}
