#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import OrchestrateExactPath
import OrchestratePluginKit

/// Operations on local paths that the plugins share: parent directories, `mkdir -p`, rename,
/// remove, and the directory fsync that makes a rename durable.
public enum LocalPath {
    /// The directory holding `path` ("." for a bare name, "/" for a top-level entry).
    /// By bytes (PathBytes): a "/" that a combining mark follows is still a "/" to the kernel.
    public static func parent(of path: String) -> String {
        var trimmed = path
        while trimmed.utf8.count > 1 && PathBytes.endsWithSlash(trimmed) { trimmed = String(decoding: trimmed.utf8.dropLast(), as: UTF8.self) }
        guard let (head, _) = PathBytes.splitAtLastSlash(trimmed) else { return "." }
        return head.isEmpty ? "/" : head
    }

    /// The last component of `path` (after its last "/" byte).
    public static func name(of path: String) -> String {
        PathBytes.splitAtLastSlash(path)?.tail ?? path
    }

    /// `mkdir -p`, following only the user's and root's symbolic links on the way
    /// (`OwnLinksOpen`); an existing non-directory in the way is an error naming it.
    public static func makeDirectories(_ path: String) throws(StepError) {
        if path.isEmpty || path == "/" || path == "." { return }
        close(try OwnLinksOpen.folder(path, creating: true))
    }

    public static func rename(_ from: String, to: String) throws(StepError) {
        if systemRename(from, to) != 0 { throw .posix("cannot rename \(from) to \(to)") }
    }

    /// Removes a file, in its folder reached as `OwnLinksOpen` reaches it (a folder swapped for
    /// another user's link is refused, not followed); one that is already gone is not an error.
    public static func remove(_ path: String) throws(StepError) {
        let folder = try OwnLinksOpen.folder(parent(of: path), creating: false)
        defer { close(folder) }
        if unlinkat(folder, name(of: path), 0) != 0 && errno != ENOENT { throw .posix("cannot remove \(path)") }
    }

    /// rename(2) of `source` onto `destination`, each in its folder reached as `OwnLinksOpen`
    /// reaches it, then an fsync of both folders. False, and nothing done, when they are on
    /// different file systems (EXDEV): the caller copies.
    public static func moveWithinFileSystem(_ source: String, to destination: String) throws(StepError) -> Bool {
        let from = try OwnLinksOpen.folder(parent(of: source), creating: false)
        defer { close(from) }
        let to = try OwnLinksOpen.folder(parent(of: destination), creating: false)
        defer { close(to) }
        guard renameat(from, name(of: source), to, name(of: destination)) == 0 else {
            if errno == EXDEV { return false }
            throw .posix("cannot move \(source) to \(destination)")
        }
        try syncFolder(to, shown: parent(of: destination))
        try syncFolder(from, shown: parent(of: source))
        return true
    }

    /// fsync of the folder `fd` names (an `O_PATH` descriptor is opened again to read).
    static func syncFolder(_ fd: Int32, shown: String) throws(StepError) {
        let readable = openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard readable >= 0 else { throw .posix("cannot open directory \(shown)") }
        defer { close(readable) }
        guard fsync(readable) == 0 else {
            throw .posix("cannot flush directory \(shown) to disk (the rename in it is not durable yet)")
        }
    }

    /// Makes the entry changes in `directory` (a rename into it, an unlink) durable.
    ///
    /// The one rule for every plugin: a failure here is an error, never ignored. Until the
    /// directory is on disk a crash can undo the rename, and a step that reported success
    /// would then have lost its file (or, for a move, find it in both places).
    public static func syncDirectory(_ directory: String) throws(StepError) {
        let handle = try LocalFile(path: directory, flags: O_RDONLY | O_DIRECTORY)
        guard fsync(handle.fd) == 0 else {
            throw .posix("cannot flush directory \(directory) to disk (the rename in it is not durable yet)")
        }
    }
}

/// rename(2), reachable from inside `LocalPath` (whose own `rename` hides the C function there).
private func systemRename(_ from: String, _ to: String) -> Int32 { rename(from, to) }
