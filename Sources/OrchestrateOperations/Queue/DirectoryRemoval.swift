import Foundation

/// Removes a directory and everything in it by descriptors (`openat`, `unlinkat`), never
/// following a symbolic link: a link inside is removed as a link, and a directory swapped for a
/// link while it goes is refused rather than followed. Names are read a bounded batch at a
/// time, so a directory of 100,000 files costs no more memory than one of 1,000.
enum DirectoryRemoval {
    /// Deeper than this is refused (each level holds a descriptor open while it goes).
    static let maximumDepth = 128
    static let namesPerBatch = 1_000

    struct Failure: Error, CustomStringConvertible {
        let path: String
        let reason: String
        var description: String { "\(path): \(reason)" }

        init(_ path: String, errno code: Int32 = errno) {
            self.path = path
            reason = String(cString: strerror(code))
        }

        init(_ path: String, reason: String) {
            self.path = path
            self.reason = reason
        }
    }

    /// Removes the directory `name` of the open directory `parent` (shown as `shown`). False
    /// when there is nothing of that name, or it is not a directory (a symbolic link or a file
    /// planted in its place is left as it is).
    static func removeDirectory(named name: String, in parent: Int32, shown: String) throws(Failure) -> Bool {
        var info = stat()
        guard fstatat(parent, name, &info, AT_SYMLINK_NOFOLLOW) == 0 else {
            if errno == ENOENT { return false }
            throw Failure(shown)
        }
        guard (info.st_mode & S_IFMT) == S_IFDIR else { return false }
        let fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        guard fd >= 0 else { throw Failure(shown) }
        do {
            defer { close(fd) }
            try removeContents(of: fd, shown: shown, depth: 1)
        }
        guard unlinkat(parent, name, AT_REMOVEDIR) == 0 || errno == ENOENT else { throw Failure(shown) }
        return true
    }

    /// Empties the open directory `fd`.
    private static func removeContents(of fd: Int32, shown: String, depth: Int) throws(Failure) {
        guard depth <= maximumDepth else { throw Failure(shown, reason: "deeper than \(maximumDepth) levels") }
        while true {
            let names = try entries(of: fd, shown: shown)
            if names.isEmpty { return }
            for name in names {
                let path = shown + "/" + String(decoding: name.dropLast().map { UInt8(bitPattern: $0) }, as: UTF8.self)
                if unlinkat(fd, name, 0) == 0 || errno == ENOENT { continue }
                guard errno == EISDIR || errno == EPERM else { throw Failure(path) }
                let child = openat(fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
                guard child >= 0 else { throw Failure(path) }
                do {
                    defer { close(child) }
                    try removeContents(of: child, shown: path, depth: depth + 1)
                }
                guard unlinkat(fd, name, AT_REMOVEDIR) == 0 || errno == ENOENT else { throw Failure(path) }
            }
        }
    }

    /// Up to `namesPerBatch` names in `fd` (NUL-terminated, as the bytes they are), from the
    /// start: what the previous batch removed is gone from the listing.
    private static func entries(of fd: Int32, shown: String) throws(Failure) -> [[CChar]] {
        let listing = dup(fd)
        guard listing >= 0, let dir = fdopendir(listing) else {
            if listing >= 0 { close(listing) }
            throw Failure(shown)
        }
        defer { closedir(dir) }
        rewinddir(dir)
        var names: [[CChar]] = []
        while names.count < namesPerBatch, let entry = readdir(dir) {
            var name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                Array(raw.bindMemory(to: CChar.self).prefix { $0 != 0 })
            }
            if name == [46] || name == [46, 46] { continue }
            name.append(0)
            names.append(name)
        }
        return names
    }
}
