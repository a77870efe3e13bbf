#if canImport(Glibc)
import Glibc
#endif
import OrchestratePluginKit

/// A file descriptor with the few POSIX calls the transfers need, closed on deinit; errors become
/// step errors naming the path.
final class LocalFile {
    let fd: Int32
    let path: String

    init(path: String, flags: Int32, mode: mode_t = 0o644) throws(StepError) {
        self.path = path
        let fd = open(path, flags | O_CLOEXEC, mode)
        guard fd >= 0 else { throw .posix("cannot open \(path)") }
        self.fd = fd
    }

    deinit { close(fd) }

    var size: Int64 {
        var st = stat()
        return fstat(fd, &st) == 0 ? Int64(st.st_size) : 0
    }

    func truncate(to length: Int64) throws(StepError) {
        guard ftruncate(fd, off_t(length)) == 0 else { throw .posix("cannot truncate \(path)") }
    }

    /// Writes all of `bytes` at `offset` (retrying short writes); false with errno set on failure.
    func write(_ bytes: UnsafeRawBufferPointer, at offset: Int64) -> Bool {
        var done = 0
        while done < bytes.count {
            let n = pwrite(fd, bytes.baseAddress! + done, bytes.count - done, off_t(offset + Int64(done)))
            if n < 0 { if errno == EINTR { continue }; return false }
            done += n
        }
        return true
    }

    func sync() throws(StepError) {
        guard fsync(fd) == 0 else { throw .posix("cannot sync \(path)") }
    }

    /// Makes a rename in `directory` durable.
    static func syncDirectory(_ directory: String) {
        let fd = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if fd >= 0 { fsync(fd); close(fd) }
    }

    static func size(of path: String) -> Int64? {
        var st = stat()
        return stat(path, &st) == 0 ? Int64(st.st_size) : nil
    }
}
