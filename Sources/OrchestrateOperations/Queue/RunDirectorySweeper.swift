import Foundation
import OrchestrateEngine
import OrchestrateStore

/// Removes from this node's runs folder (`runs/` under `--state`) the directories of runs its
/// store no longer holds: runs pruned or deleted by any node (on PostgreSQL, often another one
/// than the node that ran them), or by this one when it died between the store's delete and the
/// directory's removal. `serve` sweeps at each retention pass (docs/durability.md#retention).
///
/// What it removes, and only that: `runs/ID` for each ID named by the store's `runs.pruned` and
/// `run.deleted` events that the store does not hold now, when it is a real directory. The
/// events are read from where the last sweep stopped (`runs/.orchestrate-swept`), a few at a
/// time. Never touched: a runs folder whose list of stores (`RunsFolderOwners`) names another
/// store than this one (a folder shared by two stores), a directory of a run the store holds
/// (an id used again), a symbolic link or file in a run directory's place, anything a link
/// inside a run directory points to.
public enum RunDirectorySweeper {
    public struct Report: Sendable {
        /// Run ids whose directory was removed.
        public var removed: [String] = []
        /// Directories that could not be removed, with why.
        public var failures: [String] = []
        /// Why the folder was left alone as a whole, if it was.
        public var refused: String?
    }

    /// `runs.pruned` events read per batch: each names up to `RetentionPruner.batchSize` runs.
    public static let eventsPerBatch = 5
    /// Where the last sweep stopped: "STORE-ID SEQ".
    public static let cursorFileName = ".orchestrate-swept"

    public static func sweep(store: any StateStore, stateDirectory: String, eventsPerBatch: Int = eventsPerBatch,
                             pause: Double = 0, shouldStop: () -> Bool = { false }) throws -> Report
    {
        var report = Report()
        let folder = RunsFolderOwners.folder(stateDirectory: stateDirectory)
        let folderFD = open(folder, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard folderFD >= 0 else {
            if errno == ENOENT { return report }  // nothing ever ran here
            throw DirectoryRemoval.Failure(folder)
        }
        defer { close(folderFD) }
        let storeID = try store.storeIdentity()
        var owners = try RunsFolderOwners.read(folder: folder)
        if owners.isEmpty {
            // A folder from before the list: its directories are this store's (a directory
            // removed is still only one of a run this store removed).
            try RunsFolderOwners.register(storeID, stateDirectory: stateDirectory)
            owners = [storeID]
        }
        guard owners == [storeID] else {
            report.refused = "\(folder) holds run directories of \(owners.count) stores (\(RunsFolderOwners.fileName)); "
                + "its run directories are left alone: give each store a --state of its own"
            return report
        }
        var cursor = readCursor(folderFD, storeID: storeID)
        while !shouldStop() {
            let gone = try store.goneRuns(afterSeq: cursor, limit: eventsPerBatch)
            for id in gone.ids where RunID.isValid(id) {
                do {
                    if try DirectoryRemoval.removeDirectory(named: id, in: folderFD, shown: folder + "/" + id) {
                        report.removed.append(id)
                    }
                } catch {
                    report.failures.append(error.description)
                }
            }
            guard gone.through > cursor else { break }
            cursor = gone.through
            try writeCursor(folderFD, folder: folder, storeID: storeID, seq: cursor)
            if pause > 0 { Thread.sleep(forTimeInterval: pause) }
        }
        return report
    }

    /// The seq the last sweep of this store stopped at; 0 when none (or another store's).
    static func readCursor(_ folderFD: Int32, storeID: String) -> Int64 {
        let fd = openat(folderFD, cursorFileName, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
        guard fd >= 0 else { return 0 }
        defer { close(fd) }
        var bytes = [UInt8](repeating: 0, count: 256)
        let got = read(fd, &bytes, bytes.count)
        guard got > 0 else { return 0 }
        let fields = String(decoding: bytes[..<got], as: UTF8.self).split(whereSeparator: \.isWhitespace)
        guard fields.count == 2, fields[0] == storeID, let seq = Int64(fields[1]), seq >= 0 else { return 0 }
        return seq
    }

    /// Replaces the cursor file whole (a new file renamed over it): a crash leaves the old one.
    static func writeCursor(_ folderFD: Int32, folder: String, storeID: String, seq: Int64) throws {
        let temporary = cursorFileName + ".\(getpid()).tmp"
        _ = unlinkat(folderFD, temporary, 0)
        let fd = openat(folderFD, temporary, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw DirectoryRemoval.Failure(folder + "/" + temporary) }
        let line = Array("\(storeID) \(seq)\n".utf8)
        let written = write(fd, line, line.count)
        close(fd)
        guard written == line.count, renameat(folderFD, temporary, folderFD, cursorFileName) == 0 else {
            let failure = DirectoryRemoval.Failure(folder + "/" + cursorFileName)
            _ = unlinkat(folderFD, temporary, 0)
            throw failure
        }
    }
}
