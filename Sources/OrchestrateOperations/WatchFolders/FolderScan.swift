import Foundation
#if canImport(Glibc)
import Glibc
import OrchestrateEngine
#endif
import OrchestrateExactPath

/// What a watch compares to decide a file has stopped changing.
struct FileSignature: Equatable, Sendable {
    var size: Int64
    /// Nanoseconds since 1970.
    var mtimeNanoseconds: Int64

    /// The signature of the regular file `relative` below the watched folder `root`, or nil
    /// (gone, a folder, a symlink, a device…). Nothing on the way is followed: not the file if
    /// it is a link (what a link points to may change without the link changing), nor a folder
    /// swapped for a link since the scan (`FolderDescriptors`), which would make a file outside
    /// the watched folder look like one inside it.
    static func of(root: String, relative: String) -> FileSignature? {
        var folders = PathBytes.components(relative, omittingEmpty: true)
        guard let name = folders.popLast(), let base = try? FolderDescriptors.open(root) else { return nil }
        defer { close(base) }
        guard let folder = try? FolderDescriptors.descend(from: base, into: folders, creating: false, shown: relative) else { return nil }
        defer { close(folder) }
        var info = stat()
        guard fstatat(folder, name, &info, AT_SYMLINK_NOFOLLOW) == 0 else { return nil }
        return of(info)
    }

    /// The signature of what `info` (an `lstat`) describes, if it is a regular file.
    static func of(_ info: stat) -> FileSignature? {
        guard (info.st_mode & S_IFMT) == S_IFREG else { return nil }
        return FileSignature(size: Int64(info.st_size),
                             mtimeNanoseconds: Int64(info.st_mtim.tv_sec) * 1_000_000_000 + Int64(info.st_mtim.tv_nsec))
    }
}

/// Which files of a watched folder a watch looks at: its filters, recursion, and what is
/// always left alone (hidden names, the `after: move-to` folder).
struct FolderFilter: Sendable {
    let root: String
    let recursive: Bool
    let include: [String]
    let exclude: [String]
    /// Relative folders never entered (the move-to folder when it lies inside the watched one),
    /// byte for byte: a folder named alike in the other Unicode normalization is entered.
    let skippedFolders: Set<ExactPath>

    /// Whether a scan enters the folder `relative` (below `root`): recursive, no hidden name on
    /// the way, not the move-to folder or inside it, and no deeper than a path may be long
    /// (nesting made to be deep would make each scan cost the square of its depth).
    func entersFolder(_ relative: String) -> Bool {
        let components = PathBytes.components(relative, omittingEmpty: true)
        guard recursive, !components.isEmpty, relative.utf8.count < Int(PATH_MAX),
              !components.contains(where: { $0.utf8.first == UInt8(ascii: ".") }) else { return false }
        var prefix = ""
        for component in components {
            prefix = prefix.isEmpty ? component : prefix + "/" + component
            if skippedFolders.contains(ExactPath(prefix)) { return false }
        }
        return true
    }

    /// Whether the file at `relative` (a path below `root`) is one to hand over.
    func matches(_ relative: String) -> Bool {
        // By bytes (PathBytes), as the scan reads names: a "." a combining mark follows still
        // starts a hidden name.
        let components = PathBytes.components(relative, omittingEmpty: true)
        // Hidden names are skipped: rsync and many copy tools write to a hidden temporary name
        // and rename it when complete.
        if components.contains(where: { $0.utf8.first == UInt8(ascii: ".") }) { return false }
        if !recursive && components.count > 1 { return false }
        if skippedFolders.contains(where: { ExactPath(relative).isInside($0) }) { return false }
        let name = components.last ?? ""
        func match(_ pattern: String) -> Bool {
            pattern.contains("/") ? fnmatch(pattern, relative, 0) == 0 : fnmatch(pattern, name, 0) == 0
        }
        if !include.isEmpty && !include.contains(where: match) { return false }
        return !exclude.contains(where: match)
    }

    /// Calls `body` with every matching regular file below `root` (its relative path and
    /// signature) as the folders are read (`readdir`, one `lstat` a file): no listing of a
    /// folder is held, so a pass over 100,000 files costs no memory for them. Returns every
    /// folder entered (relative, "" for the root), for inotify to watch.
    ///
    /// A name that is not UTF-8 (a Latin-1 name from an old file server) cannot be a path in
    /// a workflow's inputs or in the store: it is left alone and passed to `unreadable`
    /// (relative, its bad bytes as `\xNN`), so the watcher can say so rather than skip it unseen.
    ///
    /// Each folder is reached from the root one step at a time without following links
    /// (`FolderDescriptors`): a subfolder swapped for a link after it was listed is not read.
    /// A root that cannot be opened (unmounted, renamed, a link) is passed to `rootFailed`.
    ///
    /// `below` scans only those folders (relative, as inotify named them) and what they hold:
    /// a folder the watch would not enter (not recursive, hidden, the move-to folder or inside
    /// it, too deep) is left out, as a scan of the whole folder leaves it out.
    ///
    /// `entering` is called with each folder before it is read (inotify watches it then, so a
    /// file made in it while it is read is heard, not left to the next scan).
    func scan(below starts: [String]? = nil, entering: (String) -> Void = { _ in }, unreadable: (String) -> Void = { _ in },
              rootFailed: (any Error) -> Void = { _ in }, _ body: (String, FileSignature) -> Void) -> [String]
    {
        var folders: [String] = []
        var pending = starts.map { $0.filter(entersFolder) } ?? [""]
        if pending.isEmpty { return [] }
        let base: Int32
        do {
            base = try FolderDescriptors.open(root)
        } catch {
            rootFailed(error)
            return []
        }
        defer { close(base) }
        while let relativeFolder = pending.popLast() {
            folders.append(relativeFolder)
            entering(relativeFolder)
            guard let opened = try? FolderDescriptors.descend(from: base, into: PathBytes.components(relativeFolder, omittingEmpty: true),
                                                              creating: false, shown: relativeFolder)
            else { continue }
            guard let directory = fdopendir(opened) else {  // owns `opened` only when it succeeds
                close(opened)
                continue
            }
            let descriptor = dirfd(directory)
            while let entry = readdir(directory) {
                let bytes = withUnsafeBytes(of: entry.pointee.d_name) { Array($0.prefix { $0 != 0 }) }
                if bytes.first == UInt8(ascii: ".") { continue }
                guard let name = String(validating: bytes, as: UTF8.self) else {
                    let shown = PathBytes.shown(bytes)
                    unreadable(relativeFolder.isEmpty ? shown : relativeFolder + "/" + shown)
                    continue
                }
                let relative = relativeFolder.isEmpty ? name : relativeFolder + "/" + name
                var info = stat()
                guard fstatat(descriptor, name, &info, AT_SYMLINK_NOFOLLOW) == 0 else { continue }
                if (info.st_mode & S_IFMT) == S_IFDIR {
                    if entersFolder(relative) { pending.append(relative) }
                } else if let signature = FileSignature.of(info), matches(relative) {
                    body(relative, signature)
                }
            }
            closedir(directory)
        }
        return folders
    }
}
