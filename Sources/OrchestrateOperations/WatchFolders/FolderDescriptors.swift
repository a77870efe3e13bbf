import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Folders of a watch reached on descriptors, for its `after:` actions. A watched folder is
/// often one other people write into, so every folder below it is theirs to swap: each is
/// entered with `O_NOFOLLOW`, and a subfolder swapped for a symbolic link (towards /etc or
/// ~/.ssh) is refused instead of followed. The check and the action (`fstatat`, then
/// `unlinkat` or `renameat`) happen in the one folder that was opened, so a swap afterwards
/// changes nothing.
///
/// ```swift
/// let root = try FolderDescriptors.open(watched.folder)          // the folder the user named
/// defer { close(root) }
/// let folder = try FolderDescriptors.descend(from: root, into: ["shot01"], creating: false, shown: "shot01")
/// defer { close(folder) }
/// unlinkat(folder, "frame.dpx", 0)
/// ```
enum FolderDescriptors {
    /// The way to a folder is not one to take (a link or another user's folder in it).
    struct Refused: Error, CustomStringConvertible {
        let description: String
    }

    /// The action itself failed (EACCES, EIO): worth trying again later.
    struct Failed: Error, CustomStringConvertible {
        let description: String
    }

    /// A folder on the way is not there (renamed or deleted since), and was not to be made.
    struct Missing: Error, CustomStringConvertible {
        let description: String
    }

    /// The folder `path` names (links followed: the user wrote it in the workflow), open to
    /// be used as the base of `*at` calls. Not opening it is a `Failed`, never a `Refused`:
    /// a share unmounted for a while, or no descriptor left (EMFILE), passes, and the action
    /// waiting for it is tried again rather than given up for good.
    static func open(_ path: String) throws(Failed) -> Int32 {
        let fd = Glibc.open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { throw Failed(description: "cannot open the folder \(path): \(String(cString: strerror(errno)))") }
        return fd
    }

    /// The folder `components` below `base`, each entered with `O_NOFOLLOW | O_DIRECTORY` (a
    /// link, a file or a FIFO in a folder's place is refused, without blocking); with `creating`,
    /// a missing one is made (0755) first. `shown` names the path in messages. With
    /// `owned`, each folder entered must belong to the current user or root: a folder another
    /// user made beforehand is theirs to fill with links.
    ///
    /// Throws `Refused` for a link, a file or another user's folder in the way, `Missing` for a
    /// folder that is not there (without `creating`), `Failed` when the system refused (EACCES,
    /// EMFILE, ENOSPC…): worth trying again.
    static func descend(from base: Int32, into components: [String], creating: Bool, owned: Bool = false,
                        shown: String) throws -> Int32
    {
        var folder = dup(base)
        guard folder >= 0 else { throw Failed(description: "cannot open \(shown): \(String(cString: strerror(errno)))") }
        for name in components where !name.isEmpty && name != "." {
            guard name != ".." else {
                close(folder)
                throw Refused(description: "\(shown) leaves its folder (\"..\")")
            }
            var next = openat(folder, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
            if next < 0 && errno == ENOENT && creating {
                if mkdirat(folder, name, 0o755) != 0 && errno != EEXIST {
                    let number = errno
                    close(folder)
                    throw Failed(description: "cannot create a folder of \(shown): \(String(cString: strerror(number)))")
                }
                next = openat(folder, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
            }
            guard next >= 0 else {
                let number = errno
                close(folder)
                // ELOOP or ENOTDIR: a symbolic link (or a file) where a folder was.
                if number == ELOOP || number == ENOTDIR {
                    throw Refused(description: "\(name) on the way to \(shown) is not a folder but a symbolic link or a file: "
                        + "someone replaced it, and it is not followed")
                }
                if number == ENOENT { throw Missing(description: "\(name) on the way to \(shown) is not there") }
                throw Failed(description: "cannot open \(shown): \(String(cString: strerror(number)))")
            }
            close(folder)
            folder = next
            if owned {
                var info = stat()
                guard fstat(folder, &info) == 0, info.st_uid == geteuid() || info.st_uid == 0 else {
                    close(folder)
                    throw Refused(description: "the folder \(name) on the way to \(shown) belongs to another user (uid \(info.st_uid)), "
                        + "who could fill it with links; move it away or use a folder of your own")
                }
            }
        }
        return folder
    }
}
