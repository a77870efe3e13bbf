import CPluginFiles
import Glibc
import OrchestratePluginKit

/// Opens a file to read the way the kernel would, except that a symbolic link is followed only
/// when it belongs to the current user or to root: Linux's `protected_symlinks` rule, which
/// guards only sticky world-writable folders such as /tmp, applied to every folder on the way.
///
/// Why: an upload's source is often in a folder other people can write (a hot folder, a share a
/// vendor delivers into). Whoever can write there could otherwise swap a file that was handed
/// over for a link to `~/.ssh/id_ed25519` between the hand-over and the upload's open, and
/// have this user's own files sent to a bucket they can read. Nobody else can make a link that
/// belongs to this user, so the user's own links (and the system's) still work.
///
/// Downloads walk to their destination's folder the same way (`folder`), so a link another user
/// planted where a folder was expected cannot lead a download's bytes, or `mkdir -p`, into a
/// folder of this user's choosing (`~/.ssh`).
///
/// The walk is made on descriptors, one component at a time (`openat` with `O_NOFOLLOW`,
/// `readlinkat` on the link itself), so no component can be swapped between its check and its
/// use. A FIFO at the end is refused instead of blocking the open until a writer comes.
enum OwnLinksOpen {
    /// As the kernel's limit on links followed in one lookup.
    static let maximumLinks = 40

    private static let pathOnly = orc_open_path_flag()

    /// A descriptor open for reading on `path`; throws `untrusted_link` for a link another user
    /// made, `not_a_file` for a FIFO or socket, else the errno the open gave.
    /// With `followingLast: false`, a link as the last component is refused too (ELOOP): a
    /// tree's file, listed as a regular file, that became a link since.
    static func open(_ path: String, followingLast: Bool = true) throws(StepError) -> Int32 {
        try walk(path, to: .file(followingLast: followingLast))
    }

    /// An `O_PATH` descriptor on the folder `path` (for `openat`, `renameat`, `unlinkat`), reached
    /// by the same walk; with `creating`, missing folders on the way are made (0755), so `mkdir
    /// -p` cannot be led through another user's link either.
    static func folder(_ path: String, creating: Bool) throws(StepError) -> Int32 {
        try walk(path, to: .folder(creating: creating))
    }

    private enum Goal {
        case file(followingLast: Bool)
        case folder(creating: Bool)
    }

    private static func walk(_ path: String, to goal: Goal) throws(StepError) -> Int32 {
        // Fast path, one system call: a path without any link needs no walk. Any failure (a
        // link on the way, a missing folder to make, an old kernel) takes the walk, which also
        // says what went wrong.
        let direct = orc_open_without_links(path, isFile(goal) ? O_RDONLY | O_NONBLOCK : pathOnly | O_DIRECTORY)
        if direct >= 0 { return isFile(goal) ? try readable(direct, path: path) : direct }
        var pending = ArraySlice(components(of: Array(path.utf8)))
        var folder = try start(absolute: path.hasPrefix("/"), path: path)
        var linksFollowed = 0
        // The path as walked so far, for messages.
        var walked = path.hasPrefix("/") ? "" : "."
        while let name = pending.popFirst() {
            let isLast = pending.isEmpty
            var found = at(folder, name) { openat($0, $1, pathOnly | O_NOFOLLOW | O_CLOEXEC) }
            if found < 0, errno == ENOENT, case .folder(creating: true) = goal {
                // EEXIST: made meanwhile (another step, a link planted): looked at as found.
                if at(folder, name, { mkdirat($0, $1, 0o755) }) != 0 && errno != EEXIST {
                    let number = errno
                    close(folder)
                    throw .posix("cannot create directory \(walked)/\(String(decoding: name, as: UTF8.self))", errno: number)
                }
                found = at(folder, name) { openat($0, $1, pathOnly | O_NOFOLLOW | O_CLOEXEC) }
            }
            var info = stat()
            guard found >= 0, fstat(found, &info) == 0 else {
                let number = errno
                if found >= 0 { close(found) }
                close(folder)
                throw .posix("cannot open \(path)", errno: number)
            }
            switch info.st_mode & S_IFMT {
            case S_IFLNK:
                defer { close(found) }
                let link = walked + "/" + String(decoding: name, as: UTF8.self)
                if isLast, case .file(followingLast: false) = goal {
                    close(folder)
                    throw .posix("cannot open \(path)", errno: ELOOP)
                }
                guard info.st_uid == geteuid() || info.st_uid == 0 else {
                    close(folder)
                    throw StepError.permanent("\(path): the symbolic link \(link) belongs to another user (uid \(info.st_uid)) and is not "
                        + "followed: in a folder others can write, it could point anywhere this user can read or write", code: "untrusted_link")
                }
                if isLast, isFile(goal), isProc(folder) {
                    // /proc's own links (/dev/stdin, /proc/self/fd/N) name no path one could walk
                    // ("pipe:[…]", a deleted file): the kernel follows them.
                    let opened = at(folder, name) { openat($0, $1, O_RDONLY | O_NONBLOCK | O_CLOEXEC) }
                    close(folder)
                    guard opened >= 0 else { throw .posix("cannot open \(path)") }
                    return try readable(opened, path: path)
                }
                linksFollowed += 1
                let target: [UInt8]
                do throws(StepError) {
                    guard linksFollowed <= maximumLinks else { throw .posix("cannot open \(path)", errno: ELOOP) }
                    target = try readLink(found, path: path)
                    if target.first == UInt8(ascii: "/") {
                        let root = try start(absolute: true, path: path)
                        close(folder)
                        folder = root
                        walked = ""
                    }
                } catch {
                    close(folder)
                    throw error
                }
                pending = ArraySlice(components(of: target) + pending)
            case S_IFDIR where !isLast || !isFile(goal):
                close(folder)
                folder = found
                walked += "/" + String(decoding: name, as: UTF8.self)
            default:
                close(found)
                defer { close(folder) }
                guard isLast, isFile(goal) else {
                    throw .permanent("\(walked)/\(String(decoding: name, as: UTF8.self)) is not a directory (on the way to \(path))", code: "ENOTDIR")
                }
                return try openLast(name, in: folder, path: path)
            }
        }
        guard isFile(goal) else { return folder }
        // The path ended in a folder ("/", ".", "a/.."): not a file to read.
        close(folder)
        throw .posix("cannot read \(path)", errno: EISDIR)
    }

    /// Whether `folder` is in /proc (PROC_SUPER_MAGIC).
    private static func isProc(_ folder: Int32) -> Bool { orc_is_proc(folder) == 1 }

    private static func isFile(_ goal: Goal) -> Bool {
        if case .file = goal { return true }
        return false
    }

    /// The last component, opened again to read: `O_NOFOLLOW`, so a link swapped in since its
    /// check is refused (ELOOP), not followed; `O_NONBLOCK`, so a FIFO cannot hold the open.
    private static func openLast(_ name: [UInt8], in folder: Int32, path: String) throws(StepError) -> Int32 {
        var fd: Int32
        repeat { fd = at(folder, name) { openat($0, $1, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC) } } while fd < 0 && errno == EINTR
        guard fd >= 0 else { throw .posix("cannot open \(path)") }
        return try readable(fd, path: path)
    }

    /// `fd` (opened with `O_NONBLOCK`) blocking again, unless it is a FIFO or a socket.
    private static func readable(_ fd: Int32, path: String) throws(StepError) -> Int32 {
        var info = stat()
        let kind = fstat(fd, &info) == 0 ? info.st_mode & S_IFMT : 0
        guard kind != S_IFIFO && kind != S_IFSOCK else {
            close(fd)
            throw StepError.permanent("\(path) is a \(kind == S_IFIFO ? "FIFO" : "socket"), not a file", code: "not_a_file")
        }
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK)
        return fd
    }

    private static func start(absolute: Bool, path: String) throws(StepError) -> Int32 {
        let fd = Glibc.open(absolute ? "/" : ".", pathOnly | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { throw .posix("cannot open \(path)") }
        return fd
    }

    /// Components without the empty and "." ones; ".." stays, and `openat` takes it as the
    /// kernel does (the parent of the folder reached, not of the path as written).
    /// By bytes: a link's target need not be UTF-8, and its bytes are what the kernel follows.
    private static func components(of path: [UInt8]) -> [[UInt8]] {
        path.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: true).map(Array.init).filter { $0 != [UInt8(ascii: ".")] }
    }

    /// Calls `body(folder, name)` with `name` as a C string.
    private static func at(_ folder: Int32, _ name: [UInt8], _ body: (Int32, UnsafePointer<CChar>) -> Int32) -> Int32 {
        (name + [0]).withUnsafeBufferPointer { bytes in
            bytes.withMemoryRebound(to: CChar.self) { body(folder, $0.baseAddress!) }
        }
    }

    private static func readLink(_ fd: Int32, path: String) throws(StepError) -> [UInt8] {
        var buffer = [UInt8](repeating: 0, count: Int(PATH_MAX) + 1)
        let n = buffer.withUnsafeMutableBufferPointer { bytes in
            bytes.withMemoryRebound(to: CChar.self) { readlinkat(fd, "", $0.baseAddress!, $0.count - 1) }
        }
        guard n >= 0 else { throw .posix("cannot read a link on the way to \(path)") }
        return Array(buffer[0 ..< n])
    }
}
