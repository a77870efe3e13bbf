#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import CPluginFiles
import OrchestratePluginKit

/// An open local file used with explicit offsets (pread/pwrite), so several threads can read or
/// write different ranges at once and a resume can start anywhere. Closed on deinit. Every
/// failure is a `StepError` naming the path (code = the errno name).
public final class LocalFile: @unchecked Sendable {
    /// The size of the chunks files are streamed in: large enough for full disk throughput,
    /// small enough to notice cancellation at once and keep memory flat.
    public static let chunkSize = 1 << 20

    public let fd: Int32
    public let path: String

    /// Opens `path` with `flags` (O_CLOEXEC added; O_CREAT uses `mode`), retrying EINTR.
    public init(path: String, flags: Int32, mode: mode_t = 0o644) throws(StepError) {
        self.path = path
        var fd: Int32
        repeat { fd = open(path, flags | O_CLOEXEC, mode) } while fd < 0 && errno == EINTR
        guard fd >= 0 else { throw .posix("cannot open \(path)") }
        self.fd = fd
    }

    /// Takes over an open descriptor (closed on deinit).
    public init(adopting fd: Int32, path: String) {
        self.path = path
        self.fd = fd
    }

    /// Opens an existing file to read it (an upload's source, a file to hash), following only
    /// symbolic links of the current user or root (`OwnLinksOpen`: a link planted in a folder
    /// others can write does not turn an upload into a copy of this user's keys).
    public convenience init(reading path: String) throws(StepError) {
        self.init(adopting: try OwnLinksOpen.open(path), path: path)
    }

    /// The same for a file a tree listed as a regular file: a link in its place now (put there
    /// since the listing) is refused (ELOOP), whoever made it.
    public convenience init(readingListed path: String) throws(StepError) {
        self.init(adopting: try OwnLinksOpen.open(path, followingLast: false), path: path)
    }

    deinit { close(fd) }

    /// The current size (0 if fstat fails, which it cannot on an open descriptor).
    public var size: Int64 {
        var st = stat()
        return fstat(fd, &st) == 0 ? Int64(st.st_size) : 0
    }

    /// Reads up to `buffer.count` bytes at `offset`; 0 means end of file.
    public func read(into buffer: UnsafeMutableRawBufferPointer, at offset: Int64) throws(StepError) -> Int {
        while true {
            let n = pread(fd, buffer.baseAddress, buffer.count, off_t(offset))
            if n >= 0 { return n }
            if errno != EINTR { throw .posix("cannot read \(path)") }
        }
    }

    /// Writes all of `bytes` at `offset`, retrying short writes.
    public func write(_ bytes: UnsafeRawBufferPointer, at offset: Int64) throws(StepError) {
        var done = 0
        while done < bytes.count {
            let n = pwrite(fd, bytes.baseAddress! + done, bytes.count - done, off_t(offset) + off_t(done))
            if n < 0 {
                if errno == EINTR { continue }
                throw .posix("cannot write \(path)")
            }
            done += n
        }
    }

    /// Streams the bytes from `start` to `end` (or to the end of the file) through one reused
    /// buffer of `chunkSize`, calling `body(bytes, offset)` for each piece; returns where it
    /// stopped (`end`, or the end of the file if that came first).
    @discardableResult
    public func readChunks(from start: Int64 = 0, to end: Int64? = nil,
                           _ body: (UnsafeRawBufferPointer, Int64) throws(StepError) -> Void) throws(StepError) -> Int64
    {
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: Self.chunkSize, alignment: 4096)
        defer { buffer.deallocate() }
        var offset = start
        while end.map({ offset < $0 }) ?? true {
            let want = Int(min(Int64(buffer.count), (end ?? Int64.max) - offset))
            let n = try read(into: UnsafeMutableRawBufferPointer(rebasing: buffer[0 ..< want]), at: offset)
            if n == 0 { break }
            try body(UnsafeRawBufferPointer(rebasing: buffer[0 ..< n]), offset)
            offset += Int64(n)
        }
        return offset
    }

    public func truncate(to length: Int64) throws(StepError) {
        guard ftruncate(fd, off_t(length)) == 0 else { throw .posix("cannot truncate \(path)") }
    }

    /// fsync: the data and the size are on disk when this returns.
    public func sync() throws(StepError) {
        guard fsync(fd) == 0 else { throw .posix("cannot flush \(path) to disk") }
    }

    /// A second, write-only descriptor of this file whose writes bypass the page cache
    /// (`O_DIRECT`), or nil where the system or the file system has none. Its writes must
    /// start, end and sit in memory at multiples of `directAlignment`. The durability rules do
    /// not change: a direct write is on the device when it returns, but the file's size and
    /// block map are only after `sync()`.
    public func openedForDirectWrites() -> LocalFile? {
        let fd = orc_reopen_direct(self.fd)
        return fd >= 0 ? LocalFile(adopting: fd, path: path) : nil
    }

    /// What `openedForDirectWrites`' writes align to (offset, length and memory).
    public static let directAlignment = Int(orc_direct_alignment())

    /// Sets the permission bits (best effort, as `cp` does: a filesystem without modes keeps its own).
    public func setPermissions(_ mode: mode_t) { _ = fchmod(fd, mode & 0o7777) }
}
