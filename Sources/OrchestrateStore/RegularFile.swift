import Foundation

/// Opens a file that must be a regular file (a token, the remotes file, a secret) without
/// letting whatever else lies under its name hold the caller up: `O_NONBLOCK` for the open, so
/// a FIFO planted under the name is refused instead of hanging `open` until a writer comes, and
/// a device or socket is refused before anything is read from it.
///
/// ```swift
/// switch RegularFile.open(path) {
/// case .success(let handle): let data = try RegularFile.read(handle, atMost: 1 << 20)
/// case .failure(.missing): ...            // no file: the caller's default
/// case .failure(.refused(let why)): ...   // "is not a regular file", "cannot be opened: …"
/// }
/// ```
public enum RegularFile {
    public enum Failure: Error, Sendable {
        case missing
        /// Why, as the end of a sentence that starts with the path: "is not a regular file".
        case refused(String)
    }

    /// An open, blocking-again handle on the regular file `path` (symlinks followed: what is
    /// opened is what the caller then checks with `fstat`).
    public static func open(_ path: String) -> Result<FileHandle, Failure> {
        let fd = Foundation.open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC)
        guard fd >= 0 else {
            if errno == ENOENT { return .failure(.missing) }
            return .failure(.refused("cannot be opened: \(String(cString: strerror(errno)))"))
        }
        let handle = FileHandle(fileDescriptor: fd, closeOnDealloc: true)
        var info = stat()
        guard fstat(fd, &info) == 0 else { return .failure(.refused("cannot be examined: \(String(cString: strerror(errno)))")) }
        guard info.st_mode & S_IFMT == S_IFREG else { return .failure(.refused("is not a regular file")) }
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK)
        return .success(handle)
    }

    /// Up to `atMost + 1` bytes, so a caller can tell a file that is too large from one that fits.
    public static func read(_ handle: FileHandle, atMost: Int) throws -> Data {
        try handle.read(upToCount: atMost + 1) ?? Data()
    }
}
