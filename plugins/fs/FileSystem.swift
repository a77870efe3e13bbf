#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import OrchestratePluginKit

/// The POSIX calls the fs steps make, each turning a failure into a `StepError` that names the
/// path (code = errno name, retryable when the condition can pass).
enum FileSystem {
    /// The size of the chunks files are read and written in: large enough for full disk
    /// throughput, small enough to notice cancellation at once and keep memory flat.
    static let chunkSize = 1 << 20

    struct Info {
        let size: Int64
        let mode: mode_t
        let isDirectory: Bool
        let isRegular: Bool
        let mtimeNanoseconds: Int64
        let device: UInt64
    }

    /// `stat` of `path`, or nil when it does not exist.
    static func info(_ path: String) throws(StepError) -> Info? {
        var s = stat()
        guard stat(path, &s) == 0 else {
            if errno == ENOENT { return nil }
            throw .posix("cannot stat \(path)")
        }
        let type = s.st_mode & S_IFMT
        #if canImport(Darwin)
        let mtime = Int64(s.st_mtimespec.tv_sec) * 1_000_000_000 + Int64(s.st_mtimespec.tv_nsec)
        #else
        let mtime = Int64(s.st_mtim.tv_sec) * 1_000_000_000 + Int64(s.st_mtim.tv_nsec)
        #endif
        return Info(size: Int64(s.st_size), mode: s.st_mode, isDirectory: type == S_IFDIR,
                    isRegular: type == S_IFREG, mtimeNanoseconds: mtime, device: UInt64(s.st_dev))
    }

    static func openFile(_ path: String, _ flags: Int32, mode: mode_t = 0o644) throws(StepError) -> Int32 {
        while true {
            let fd = open(path, flags | O_CLOEXEC, mode)
            if fd >= 0 { return fd }
            if errno != EINTR { throw .posix("cannot open \(path)") }
        }
    }

    /// Reads up to `count` bytes at `offset`; 0 means end of file.
    static func readChunk(_ fd: Int32, into buffer: UnsafeMutableRawPointer, count: Int, at offset: Int64,
                     path: String) throws(StepError) -> Int
    {
        while true {
            let n = pread(fd, buffer, count, off_t(offset))
            if n >= 0 { return n }
            if errno != EINTR { throw .posix("cannot read \(path)") }
        }
    }

    /// Writes all `count` bytes at `offset`.
    static func writeAll(_ fd: Int32, from buffer: UnsafeRawPointer, count: Int, at offset: Int64,
                      path: String) throws(StepError)
    {
        var written = 0
        while written < count {
            let n = pwrite(fd, buffer + written, count - written, off_t(offset) + off_t(written))
            if n < 0 {
                if errno == EINTR { continue }
                throw .posix("cannot write \(path)")
            }
            written += n
        }
    }

    static func sync(_ fd: Int32, path: String) throws(StepError) {
        if fsync(fd) != 0 { throw .posix("cannot flush \(path) to disk") }
    }

    /// Makes the directory entry changes in `directory` (a rename, an unlink) durable.
    static func syncDirectory(_ directory: String) throws(StepError) {
        let fd = try openFile(directory, O_RDONLY | O_DIRECTORY)
        defer { close(fd) }
        try sync(fd, path: directory)
    }

    /// `mkdir -p`.
    static func makeDirectories(_ path: String) throws(StepError) {
        if path.isEmpty || path == "/" || path == "." { return }
        if let existing = try info(path) {
            if existing.isDirectory { return }
            throw .permanent("\(path) exists and is not a directory", code: "ENOTDIR")
        }
        try makeDirectories(parent(of: path))
        if mkdir(path, 0o755) != 0 && errno != EEXIST { throw .posix("cannot create directory \(path)") }
    }

    /// The error for an input that names something other than a regular file: the fs steps move
    /// one file at a time.
    static func notAFile(_ input: String, _ path: String, _ info: Info) -> StepError {
        guard info.isDirectory else { return .invalidInput("\(input) \(path) is not a regular file") }
        return .invalidInput("\(input) \(path) is a directory: the fs steps move one file; "
            + "name a file in \(input), or copy the tree with sftp.upload/sftp.download or exec [cp, -r, …]", code: "EISDIR")
    }

    static func parent(of path: String) -> String {
        var trimmed = Substring(path)
        while trimmed.count > 1 && trimmed.hasSuffix("/") { trimmed = trimmed.dropLast() }
        guard let slash = trimmed.lastIndex(of: "/") else { return "." }
        return slash == trimmed.startIndex ? "/" : String(trimmed[..<slash])
    }

    static func renameFile(_ from: String, _ to: String) throws(StepError) {
        if rename(from, to) != 0 { throw .posix("cannot rename \(from) to \(to)") }
    }

    static func removeFile(_ path: String) throws(StepError) {
        if unlink(path) != 0 && errno != ENOENT { throw .posix("cannot remove \(path)") }
    }
}
