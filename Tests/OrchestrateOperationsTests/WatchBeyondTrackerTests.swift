import Foundation
import OrchestrateModel
import OrchestrateStore
import OrchestrateTestSupport
import Testing

@testable import OrchestrateOperations

/// A watch whose folder holds more files than it tracks at once (`filesWaitingAtOnce`, 16,384
/// by default; 40 here), on both stores: the files left out are taken in by a scan as soon as
/// half of the tracked ones were handed over, not at the next periodic scan (set to a minute
/// here), and every file is handed over exactly once.
@Suite(.serialized) struct WatchBeyondTrackerTests {
    let dir = TemporaryDirectory("watch-beyond")

    func open(_ kind: StoreKind) throws -> any StateStore { try kind.open(in: dir) }

    func write(_ relative: String) throws {
        let path = dir.file("in/" + relative).path
        try FileManager.default.createDirectory(atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        try Data(relative.utf8).write(to: URL(fileURLWithPath: path))
    }

    func feedWatch(_ name: String) throws -> (watched: WatchedFolder, folder: String) { try FeedWatch.make(name, in: dir) }

    @Test(arguments: StoreKind.allCases)
    func filesBeyondWhatIsTrackedAreTakenInByAScanOnceThereIsRoom(_ kind: StoreKind) throws {
        let (watched, _) = try FeedWatch.make("in", in: dir, recursive: true)
        let store = try open(kind)
        // 300 files there before the watch starts (its first scan meets them), 100 after (inotify).
        let before = (0..<300).map { "shot\($0 / 100)/frame_\($0).dpx" }
        let after = (300..<400).map { "late/frame_\($0).dpx" }
        for relative in before { try write(relative) }

        var options = FolderWatcher.Options()
        options.filesWaitingAtOnce = 40
        options.scanIntervalWithInotify = 60
        options.environment = [:]
        let watcher = try FolderWatcher(watched: watched, store: store, options: options)
        watcher.start()
        defer { watcher.stop() }
        for relative in after { try write(relative) }

        let deadline = Date().addingTimeInterval(30)
        var handedOver: [String] = []
        while Date() < deadline {
            handedOver = try store.watchHandOffs(watch: watched.identity, pendingOnly: false).map(\.file.path)
            if handedOver.count >= before.count + after.count { break }
            Thread.sleep(forTimeInterval: 0.2)
        }
        #expect(Set(handedOver) == Set(before + after), "\(handedOver.count) of \(before.count + after.count) handed over")
        // Exactly once: the feed run got one item a file (the store's key alone could not tell).
        #expect(Self.itemsBySource(store).values.allSatisfy { $0 == 1 }, "a file handed over twice")
        #expect(Self.itemsBySource(store).count == before.count + after.count)
    }

    /// A delivery of folders into a recursive watch (made in place, moved in whole, one inside
    /// another): each new folder is scanned and watched alone, so the folder is scanned whole
    /// once, at the start, not once more for every folder that arrives (bench/scale/
    /// watch_delivery.py: 200 folders moved into a watch of 20,000 files kept a core busy).
    @Test func newFoldersAreScannedAloneNotTheWholeTreeAgain() throws {
        let (watched, folder) = try FeedWatch.make("tree", in: dir, recursive: true)
        let store = try open(.sqlite)
        var options = FolderWatcher.Options()
        options.scanIntervalWithInotify = 600
        options.environment = [:]
        let watcher = try FolderWatcher(watched: watched, store: store, options: options)
        watcher.start()
        var stopped = false
        defer { if !stopped { watcher.stop() } }
        // Once a first file is handed over, the first scan is done and inotify watches the folder.
        try Data("first".utf8).write(to: URL(fileURLWithPath: folder + "/first.dpx"))
        let started = Date().addingTimeInterval(30)
        while Date() < started, try store.watchHandOffs(watch: watched.identity, pendingOnly: false).isEmpty {
            Thread.sleep(forTimeInterval: 0.05)
        }
        for shot in 0..<10 {
            try FileManager.default.createDirectory(atPath: folder + "/shot\(shot)", withIntermediateDirectories: true)
            for frame in 0..<5 { try Data("\(shot) \(frame)".utf8).write(to: URL(fileURLWithPath: folder + "/shot\(shot)/frame_\(frame).dpx")) }
        }
        // One made elsewhere and moved in whole, with a folder inside it.
        let staging = dir.file("staging/shot99/sub").path
        try FileManager.default.createDirectory(atPath: staging, withIntermediateDirectories: true)
        try Data("x".utf8).write(to: URL(fileURLWithPath: staging + "/frame_0.dpx"))
        try Data("y".utf8).write(to: URL(fileURLWithPath: dir.file("staging/shot99").path + "/frame_1.dpx"))
        #expect(rename(dir.file("staging/shot99").path, folder + "/shot99") == 0)
        let expected = ["first.dpx"] + (0..<10).flatMap { shot in (0..<5).map { "shot\(shot)/frame_\($0).dpx" } }
            + ["shot99/sub/frame_0.dpx", "shot99/frame_1.dpx"]

        let deadline = Date().addingTimeInterval(30)
        var handedOver: [String] = []
        while Date() < deadline {
            handedOver = try store.watchHandOffs(watch: watched.identity, pendingOnly: false).map(\.file.path)
            if handedOver.count >= expected.count { break }
            Thread.sleep(forTimeInterval: 0.1)
        }
        watcher.stop()
        stopped = true
        #expect(Set(handedOver) == Set(expected), "\(handedOver.count) of \(expected.count): \(Set(expected).subtracting(handedOver))")
        #expect(watcher.fullScans == 1, "\(watcher.fullScans) scans of the whole folder")
        #expect(watcher.folderScans >= 1)
    }

    /// A watch making a run per file holds back while `pendingRunsAtOnce` of its runs wait (5
    /// here, 10,000 by default): the other files stay in the folder, said once, and go as runs
    /// end. A flood of files does not become as many queued runs.
    @Test(arguments: StoreKind.allCases)
    func aWatchHoldsBackWhileItsRunsWait(_ kind: StoreKind) throws {
        let file = dir.write("runs-\(kind).yaml", """
            name: runs
            inputs:
              source: { type: string, required: true }
            on:
              watch: { path: runs-\(kind), settle: 200ms, inputs: { source: "${{ file.path }}" } }
            steps:
              a: { uses: exec, with: { command: ["true"] } }
            """).path
        let folder = dir.file("runs-\(kind)").path
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        for i in 0..<12 { try Data("\(i)".utf8).write(to: URL(fileURLWithPath: folder + "/clip_\(i).mov")) }
        let watched = try WatchedFolder(workflow: WorkflowLoader.parse(source: String(contentsOfFile: file, encoding: .utf8),
                                                                       file: file, catalog: nil))
        let store = try open(kind)
        let warnings = WarningLog()
        var options = FolderWatcher.Options()
        options.pendingRunsAtOnce = 5
        options.environment = [:]
        options.warn = { warnings.append($0) }
        let watcher = try FolderWatcher(watched: watched, store: store, options: options)
        watcher.start()
        defer { watcher.stop() }
        func runs() -> [RunRecord] { (try? store.listRuns(RunFilter())) ?? [] }
        func waitFor(_ count: Int) -> Bool {
            let deadline = Date().addingTimeInterval(30)
            while Date() < deadline && runs().count < count { Thread.sleep(forTimeInterval: 0.05) }
            return runs().count == count
        }
        func finish(_ n: Int) throws {
            var batch = JournalBatch()
            for var run in runs().filter({ $0.status == .queued }).prefix(n) {
                run.status = .succeeded
                run.finishedAt = Date().timeIntervalSince1970
                batch.runUpdates.append(run)
            }
            try store.commit(batch)
        }
        #expect(waitFor(5))
        Thread.sleep(forTimeInterval: 2)  // a second's look and more: still held back
        #expect(runs().count == 5)
        #expect(warnings.lines.filter { $0.contains("5 runs of this watch wait already") }.count == 1, "\(warnings.lines)")
        try finish(3)  // their hand-offs end (after: keep): room for 3 more
        #expect(waitFor(8))
        Thread.sleep(forTimeInterval: 1.5)
        #expect(runs().count == 8)
        try finish(8)
        #expect(waitFor(12))
        #expect(Set(runs().compactMap { $0.inputs["source"]?.stringValue }).count == 12)
    }

    /// How many items the watch's feed run got for each source path.
    static func itemsBySource(_ store: any StateStore) -> [String: Int] {
        guard let run = try? store.listRuns(RunFilter()).first,
              let events = try? store.events(runID: run.id, afterSeq: 0, limit: 100_000) else { return [:] }
        var counts: [String: Int] = [:]
        for event in events where event.type == .itemAdded {
            if let source = event.data["value"]?["source"]?.stringValue { counts[source, default: 0] += 1 }
        }
        return counts
    }

    /// With `after: keep` the watch remembers the versions it handed over that are still in the
    /// folder, not every version the folder ever had: after files were deleted and rewritten
    /// behind its back, a scan leaves it holding the folder's current files only, and none is
    /// handed over again. Without the scan's pruning it held all 60 versions.
    @Test(arguments: StoreKind.allCases)
    func theVersionsHeldFollowTheFolderNotItsHistory(_ kind: StoreKind) throws {
        let (watched, folder) = try feedWatch("in-\(kind)")
        for i in 0..<50 { try Data("v1 \(i)".utf8).write(to: URL(fileURLWithPath: folder + "/clip_\(i).mov")) }
        let store = try open(kind)
        var options = FolderWatcher.Options()
        options.pollOnly = true
        options.environment = [:]
        let watcher = try FolderWatcher(watched: watched, store: store, options: options)
        watcher.start()
        var stopped = false
        defer { if !stopped { watcher.stop() } }
        func handOffs() -> Int { (try? store.watchHandOffs(watch: watched.identity, pendingOnly: false).count) ?? 0 }
        func waitFor(_ count: Int) -> Bool {
            let deadline = Date().addingTimeInterval(30)
            while Date() < deadline && handOffs() < count { Thread.sleep(forTimeInterval: 0.1) }
            return handOffs() == count
        }
        #expect(waitFor(50))
        // Behind the watch's back: 30 deleted, 10 rewritten (new versions, handed over again).
        for i in 0..<30 { try FileManager.default.removeItem(atPath: folder + "/clip_\(i).mov") }
        for i in 30..<40 { try Data("version two \(i)".utf8).write(to: URL(fileURLWithPath: folder + "/clip_\(i).mov")) }
        #expect(waitFor(60))
        Thread.sleep(forTimeInterval: 1)  // scans every 0.1 s (half the settle time)
        watcher.stop()
        stopped = true
        #expect(handOffs() == 60)
        #expect(watcher.heldVersions == 20, "\(watcher.heldVersions) versions held for 20 files")
        #expect(Self.itemsBySource(store).values.reduce(0, +) == 60)
    }

    /// A file whose name is not UTF-8 is said once (not at every scan), and again only when
    /// their number changes; the other files are handed over.
    @Test func aNameThatIsNotUTF8IsSaidOnceNotAtEveryScan() throws {
        let (watched, folder) = try feedWatch("in-latin1")
        try FolderScanTests.plant(folder, Array("caf".utf8) + [0xE9] + Array(".mov".utf8))
        try Data("ok".utf8).write(to: URL(fileURLWithPath: folder + "/ok.mov"))
        let store = try open(.sqlite)
        let warnings = WarningLog()
        var options = FolderWatcher.Options()
        options.pollOnly = true
        options.environment = [:]
        options.warn = { warnings.append($0) }
        let watcher = try FolderWatcher(watched: watched, store: store, options: options)
        watcher.start()
        Thread.sleep(forTimeInterval: 1.5)  // some 15 scans
        try FolderScanTests.plant(folder, Array("na".utf8) + [0xEF] + Array("ve.mov".utf8))
        Thread.sleep(forTimeInterval: 1)
        watcher.stop()
        let said = warnings.lines.filter { $0.contains("not UTF-8") }
        #expect(said.count == 2, "\(warnings.lines)")
        #expect(said.first?.contains("1 name(s)") == true && said.first?.contains("caf\\xE9.mov") == true, "\(said)")
        #expect(said.last?.contains("2 name(s)") == true, "\(said)")
        #expect(try store.watchHandOffs(watch: watched.identity, pendingOnly: false).map(\.file.path) == ["ok.mov"])
    }
}

/// Warnings a watcher said, from its thread.
final class WarningLog: @unchecked Sendable {
    private let lock = NSLock()
    private var said: [String] = []
    func append(_ line: String) { lock.withLock { said.append(line) } }
    var lines: [String] { lock.withLock { said } }
}
