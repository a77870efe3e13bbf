import Foundation
#if canImport(Glibc)
import Glibc
import OrchestrateEngine
#endif
import OrchestrateExactPath

/// Linux inotify on a watched folder (and its subfolders): tells the watch which paths
/// changed, so a new file is seen at once rather than at the next scan. It is only a wake-up:
/// settling is still decided by comparing signatures over time, and a periodic scan still runs
/// (inotify misses writes made by other machines on a network file system, and can overflow).
final class InotifyWatch {
    /// What happened since the last call.
    enum Change {
        /// `files` were created, written, moved in or out, or deleted; `folders` appeared (made
        /// or moved in), each to be scanned (and watched) with what it holds.
        case paths(files: Set<ExactPath>, folders: Set<ExactPath>)
        /// Too much to tell (the kernel queue overflowed, the watched folder or a folder in it
        /// was moved, the watched folder went): scan it all.
        case rescan
    }

    private let fd: Int32
    private let root: String
    private var folders: [Int32: String] = [:]  // watch descriptor -> relative folder
    /// Relative folder -> its watch descriptor. A path may be watched anew while the kernel has
    /// not yet said that its old watch went (a folder deleted and made again under the same name
    /// while something kept the old one open): that late word must not unwatch the new one.
    private var watched: [ExactPath: Int32] = [:]

    /// Nil where inotify is unavailable (not Linux, or the per-user limits are exhausted).
    init?(root: String) {
        #if os(Linux)
        fd = inotify_init1(Int32(IN_NONBLOCK | IN_CLOEXEC))
        guard fd >= 0 else { return nil }
        self.root = root
        #else
        return nil
        #endif
    }

    deinit { close(fd) }

    /// Watches `relativeFolders` ("" is the root) not yet watched; with `again`, each of them
    /// even if watched (folders just reported new: the name may be a new folder's). Returns
    /// false if the root could not be watched (then the caller relies on scanning).
    @discardableResult
    func watch(_ relativeFolders: [String], again: Bool = false) -> Bool {
        var rootWatched = watched[ExactPath("")] != nil
        for folder in relativeFolders where again || watched[ExactPath(folder)] == nil {
            let path = folder.isEmpty ? root : root + "/" + folder
            // Below the root, IN_DONT_FOLLOW: a subfolder swapped for a link since the scan is
            // not watched through it (the root is the folder the user named, links and all).
            let mask = UInt32(IN_CLOSE_WRITE | IN_MOVED_TO | IN_MOVED_FROM | IN_CREATE | IN_DELETE | IN_DELETE_SELF
                              | IN_MOVE_SELF | IN_ONLYDIR) | (folder.isEmpty ? 0 : UInt32(IN_DONT_FOLLOW))
            let wd = inotify_add_watch(fd, path, mask)
            guard wd >= 0 else { continue }
            // The same folder watched under another name (renamed, its old name's word not read
            // yet): the descriptor follows the folder.
            if let earlier = folders[wd], earlier != folder, watched[ExactPath(earlier)] == wd { watched.removeValue(forKey: ExactPath(earlier)) }
            folders[wd] = folder
            watched[ExactPath(folder)] = wd
            if folder.isEmpty { rootWatched = true }
        }
        return rootWatched
    }

    /// Waits up to `timeout` seconds for changes; nil when nothing happened.
    func wait(timeout: Double) -> Change? {
        var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        let ready = poll(&poller, 1, Int32(max(0, min(timeout, 3600)) * 1000))
        guard ready > 0 else { return nil }
        var changed: Set<ExactPath> = []
        var newFolders: Set<ExactPath> = []
        var rescan = false
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            guard n > 0 else { break }
            var offset = 0
            buffer.withUnsafeBytes { raw in
                while offset + MemoryLayout<inotify_event>.size <= n {
                    let event = raw.loadUnaligned(fromByteOffset: offset, as: inotify_event.self)
                    let nameStart = offset + MemoryLayout<inotify_event>.size
                    let nameBytes = raw[nameStart ..< nameStart + Int(event.len)].prefix { $0 != 0 }
                    let name = String(decoding: nameBytes, as: UTF8.self)
                    offset = nameStart + Int(event.len)
                    if event.mask & UInt32(IN_Q_OVERFLOW) != 0 { rescan = true; continue }
                    if event.mask & UInt32(IN_IGNORED | IN_DELETE_SELF | IN_MOVE_SELF) != 0 {
                        // A watched folder went away: forget it. A folder deleted holds nothing
                        // to find; a moved one may be elsewhere in the tree (its new name comes
                        // as a new folder, but its watch may be taken again by then): the
                        // watched folder itself, or a folder moved, is a scan of everything.
                        if let folder = folders.removeValue(forKey: event.wd) {
                            if watched[ExactPath(folder)] == event.wd { watched.removeValue(forKey: ExactPath(folder)) }
                            // Moved out, it and the folders inside it (which hear nothing of
                            // the move) are still watched where they went, and every such watch
                            // would count against the user's inotify limit for good: removed.
                            // (Deleted, the kernel removes each and says IN_IGNORED.)
                            if event.mask & UInt32(IN_MOVE_SELF) != 0 {
                                _ = inotify_rm_watch(fd, event.wd)
                                if !folder.isEmpty {
                                    for (wd, inside) in folders where ExactPath(inside).isInside(ExactPath(folder)) {
                                        _ = inotify_rm_watch(fd, wd)
                                        folders.removeValue(forKey: wd)
                                        if watched[ExactPath(inside)] == wd { watched.removeValue(forKey: ExactPath(inside)) }
                                    }
                                }
                            }
                            if folder.isEmpty || event.mask & UInt32(IN_MOVE_SELF) != 0 { rescan = true }
                        }
                        continue
                    }
                    guard let folder = folders[event.wd], !name.isEmpty else { continue }
                    let relative = folder.isEmpty ? name : folder + "/" + name
                    if event.mask & UInt32(IN_ISDIR) != 0 {
                        // A folder made or moved in: scanned (and watched) alone, not the whole
                        // tree again for each of a delivery's folders. One deleted or moved out
                        // says so on its own watch.
                        if event.mask & UInt32(IN_CREATE | IN_MOVED_TO) != 0 { newFolders.insert(ExactPath(relative)) }
                    } else {
                        changed.insert(ExactPath(relative))
                    }
                }
            }
        }
        if rescan { return .rescan }
        return changed.isEmpty && newFolders.isEmpty ? nil : .paths(files: changed, folders: newFolders)
    }
}
