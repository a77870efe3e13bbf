import OrchestrateExactPath
import OrchestrateStore

/// A set of versions of one watched folder's files (path, size, mtime), held in 24 bytes a
/// version: its path's 64-bit hash, its size and its mtime. With `after: keep` the watcher
/// holds every version it handed over that is still in the folder, up to one per file the
/// folder ever received, so that a scan (the whole folder, every 30 s) skips them without asking
/// the store; as `WatchedFile`s that was 48 bytes a version and, for a path over 15 bytes, a
/// string of its own (100,000 frames: 17 MiB, against 6 MiB here). The paths are in the store's
/// hand-off journal, which is what decides whether a version is handed over.
///
/// Two versions are taken as one only if their sizes and mtimes (to the nanosecond) are equal and
/// their paths hash alike: the hash is `Hasher`'s, seeded anew by each process, so a name cannot
/// be chosen to collide with another's, and by chance it is one in 2^64.
struct FileVersionSet {
    private struct Version: Hashable {
        let pathHash: Int
        let size: Int64
        let mtimeNanoseconds: Int64
    }

    private var versions: Set<Version> = []

    init() {}

    init<Files: Sequence>(_ files: Files) where Files.Element == WatchedFile {
        for file in files { insert(file) }
    }

    private static func version(_ file: WatchedFile) -> Version {
        // The hash of the path's bytes: String's own hash folds Unicode-equivalent names together.
        Version(pathHash: ExactPath(file.path).hashValue, size: file.size, mtimeNanoseconds: file.mtimeNanoseconds)
    }

    var count: Int { versions.count }

    func contains(_ file: WatchedFile) -> Bool { versions.contains(Self.version(file)) }

    /// Whether it was not in the set yet.
    @discardableResult
    mutating func insert(_ file: WatchedFile) -> Bool { versions.insert(Self.version(file)).inserted }

    mutating func remove(_ file: WatchedFile) { versions.remove(Self.version(file)) }

    /// Keeps only the versions `other` holds too.
    mutating func formIntersection(_ other: FileVersionSet) { versions.formIntersection(other.versions) }

    /// The bytes of a slot of its table, whatever the path (nothing else is allocated for a
    /// version).
    static let bytesPerSlot = MemoryLayout<Version>.stride

    /// The bytes its table takes: a slot and a bit of occupancy a bucket (a `Set` keeps at
    /// most three of four buckets full, so it has `capacity` * 4 / 3 of them).
    var tableBytes: Int {
        let buckets = versions.capacity * 4 / 3
        return buckets * Self.bytesPerSlot + buckets / 8
    }
}
