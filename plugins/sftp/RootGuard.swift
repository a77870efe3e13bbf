import OrchestrateExactPath
import OrchestratePluginKit

/// Keeps every remote path a step creates, reads or renames inside the server's
/// `realpath(remote_root)`, against a tree that someone else shaped (symlinks planted below or
/// around the root). The server is never trusted to confine, and a symlink is never followed
/// without the server's `realpath` of it being checked first:
/// - folders are entered one component at a time from the real root: an existing directory, a
///   symlink whose realpath is a directory inside the root (its real path is used from then on),
///   or a directory made with MKDIR and checked with LSTAT again (a symlink raced into its place
///   is refused);
/// - a leaf is LSTATed: a symlink is resolved and must lie inside the root.
/// Each folder is checked once per guard (a step, or a whole `sftp.accept-paths` session), not per
/// file; the threads of a tree share one guard.
///
/// What remains: SFTP v3 opens, renames and removes by path, with no `O_NOFOLLOW` and no
/// `openat`, so a server-side user who swaps a checked component for a symlink between the check
/// and the operation (or later in a session, once the folder is cached) is not stopped by this.
final class RootGuard: @unchecked Sendable {
    let root: RemoteRoot
    /// The server's realpath of the root: what every resolved path must lie in.
    let realRoot: String
    private let lock = Lock()
    /// Folders below the root already checked or made: relative path → real path to use (byte
    /// for byte: one checked says nothing of another whose name differs only in normalization).
    private var folders: [ExactPath: String] = [:]

    /// Resolves the root; a missing root is refused unless `create` (`create_root: true`), which
    /// makes it like `mkdir -p` (the workflow names the root, so the way to it is trusted).
    init(_ root: RemoteRoot, fs: RemoteFS, create: Bool) throws(StepError) {
        self.root = root
        switch try fs.stat(root.path) {
        case let found? where found.isDirectory:
            break
        case .some:
            throw .invalidInput("remote_root \(root.path) is not a directory on the server", code: "ENOTDIR")
        case nil:
            guard create else {
                throw .invalidInput("remote_root \(root.path) does not exist on the server (create it, or set create_root: true)",
                                    code: "remote_root_missing")
            }
            try fs.makeDirectories(root.path)
        }
        realRoot = try fs.realpath(root.path)
    }

    /// Whether the absolute `path` (a server's realpath) lies inside the real root.
    func contains(_ path: String) -> Bool {
        ExactPath(path).isInside(ExactPath(realRoot))
    }

    /// The real path of the folder `relative` (normalised, relative to the root; "" is the root),
    /// made one component at a time when missing and `create`.
    func folder(_ relative: String, create: Bool, fs: RemoteFS) throws(StepError) -> String {
        if relative.isEmpty { return realRoot }
        if let known = lock.withLock({ folders[ExactPath(relative)] }) { return known }
        let parts = PathBytes.components(relative, omittingEmpty: true)
        // Go on from the deepest folder already checked.
        var start = parts.count - 1
        var real = realRoot
        while start > 0 {
            if let known = lock.withLock({ folders[ExactPath(parts[..<start].joined(separator: "/"))] }) {
                real = known
                break
            }
            start -= 1
        }
        for index in start ..< parts.count {
            real = try enter(real + "/" + parts[index], create: create, fs: fs)
            let name = parts[...index].joined(separator: "/")
            lock.withLock { folders[ExactPath(name)] = real }
        }
        return real
    }

    /// Whether `folder(relative)` is answered from what this guard checked before.
    func isKnown(_ relative: String) -> Bool { relative.isEmpty || lock.withLock { folders[ExactPath(relative)] != nil } }

    /// Forgets every checked folder (one was removed on the server meanwhile): the next use of
    /// each checks it again from the root.
    func forgetFolders() { lock.withLock { folders.removeAll() } }

    /// The real path and attributes of the existing `relative` (a file or a folder), or nil. A
    /// symlink is resolved by the server and must lie inside the root.
    func entry(_ relative: String, fs: RemoteFS) throws(StepError) -> (path: String, attributes: SFTP.Attributes)? {
        if relative.isEmpty { return try fs.stat(realRoot).map { (realRoot, $0) } }
        let (parent, name) = RootGuard.split(relative)
        return try leaf(try folder(parent, create: false, fs: fs) + "/" + name, fs: fs)
    }

    /// `path` (its folder checked) as it may be read: itself, or the target of a symlink inside
    /// the root; nil when it does not exist.
    func leaf(_ path: String, fs: RemoteFS) throws(StepError) -> (path: String, attributes: SFTP.Attributes)? {
        guard let found = try fs.lstat(path) else { return nil }
        guard found.isSymlink else { return (path, found) }
        let target = try resolve(link: path, fs: fs)
        return try fs.lstat(target).map { (target, $0) }
    }

    /// The server's realpath of the symlink `path`, refused unless it lies inside the root.
    func resolve(link path: String, fs: RemoteFS) throws(StepError) -> String {
        let target: String
        do {
            target = try fs.realpath(path)
        } catch where error.code == "ENOENT" {
            throw .invalidInput("\(path) is a symbolic link the server cannot resolve; refusing to follow it", code: "path_escape")
        }
        guard contains(target) else {
            throw .invalidInput("\(path) is a symbolic link to \(target) on the server, outside remote_root \(root.path); refusing to follow it",
                                code: "path_escape")
        }
        return target
    }

    /// `relative` split into its folder ("" for the root) and its last name.
    static func split(_ relative: String) -> (folder: String, name: String) {
        guard let (folder, name) = PathBytes.splitAtLastSlash(relative) else { return ("", relative) }
        return (folder, name)
    }

    /// One component `path` of a folder (its parent checked): an existing directory, a symlink
    /// to a directory inside the root (its real path is returned), or, with `create`, a directory
    /// made now.
    private func enter(_ path: String, create: Bool, fs: RemoteFS) throws(StepError) -> String {
        var path = path
        if let found = try fs.lstat(path) {
            if found.isDirectory { return path }
            guard found.isSymlink else { throw .permanent("\(path) exists on the server and is not a directory", code: "ENOTDIR") }
            path = try resolve(link: path, fs: fs)
            if let target = try fs.lstat(path) {
                guard target.isDirectory else { throw .permanent("\(path) exists on the server and is not a directory", code: "ENOTDIR") }
                return path
            }
            // A link to a folder inside the root that does not exist yet: made below.
        }
        guard create else { throw .permanent("\(path) does not exist on the server", code: "ENOENT") }
        var failure: StepError?
        do { try fs.makeDirectory(path) } catch { failure = error }  // another transfer may have made it meanwhile
        // Checked again: what is there now must be a directory, not a symlink raced into its place.
        guard let made = try fs.lstat(path) else { throw failure ?? .permanent("mkdir \(path): no such file", code: "ENOENT") }
        if made.isSymlink {
            throw .invalidInput("\(path) became a symbolic link on the server while it was being created; refusing to follow it",
                                code: "path_escape")
        }
        guard made.isDirectory else { throw failure ?? .permanent("\(path) exists on the server and is not a directory", code: "ENOTDIR") }
        return path
    }
}
