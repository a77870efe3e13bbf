import Foundation
import OrchestrateModel
@testable import OrchestrateStore
import OrchestrateTestSupport
import Testing

@testable import OrchestrateOperations

/// The watcher's look at the outcome of handed-over work (`after:`), on both stores: it reads
/// the hand-offs whose work ended a page at a time and never the work still going on, so what
/// one pass holds does not grow with the files of a feed run (up to 100,000 pending); a watched
/// folder it cannot open for a while holds the `after:` action back, never gives it up.
@Suite(.serialized) struct WatchOutcomePagesTests {
    let dir = TemporaryDirectory("watch-outcomes")

    func open(_ kind: StoreKind) throws -> any StateStore { try kind.open(in: dir) }

    /// Makes the running feed run "feed" the hand-offs' items go to.
    @discardableResult
    static func makeFeedRun(_ store: any StateStore) throws -> RunRecord {
        let run = RunRecord(id: "feed", workflowName: "feed", workflowFile: "/feed.yaml", workflowSource: "name: feed",
                            inputs: [:], status: .running, createdAt: 1, runDir: RunRecord.runDirectory(for: "feed"))
        try store.createRun(run, events: [])
        return run
    }

    func watched(after: String = "delete") throws -> WatchedFolder {
        let file = dir.write("feed.yaml", """
            name: feed
            on:
              watch: { path: in, settle: 1s, feed: accept, after: \(after) }
            steps:
              accept:
                uses: sftp.accept-paths
                with: { host: h }
            """).path
        try FileManager.default.createDirectory(atPath: dir.file("in").path, withIntermediateDirectories: true)
        return try WatchedFolder(workflow: WorkflowLoader.parse(source: String(contentsOfFile: file, encoding: .utf8),
                                                                file: file, catalog: nil))
    }

    /// A watch of `in` with `after`, its store with the running feed run, and its hand-over.
    func watching(_ kind: StoreKind, after: String = "delete") throws -> (WatchedFolder, any StateStore, WatchHandOver) {
        let watched = try watched(after: after)
        let store = try open(kind)
        try Self.makeFeedRun(store)
        return (watched, store, try WatchHandOver(watched: watched, store: store, queue: "default", environment: [:]))
    }

    /// Writes `in/relative`, hands it over as item `id` of the feed run, and ends that item done:
    /// a file whose work succeeded, its `after:` still to do.
    func handedOverAndDone(_ relative: String, id: String, by handOver: WatchHandOver, in store: any StateStore) throws -> WatchedFile {
        try Data(relative.utf8).write(to: dir.file("in/" + relative))
        let file = handOver.key(relative, try #require(FileSignature.of(root: dir.file("in").path, relative: relative)))
        #expect(try store.handOver(file, as: .item(runID: "feed", stepID: "accept", id: id, json: "{}", event: nil), events: []))
        try store.finishItem(runID: "feed", stepID: "accept", id: id, error: nil, event: nil, fence: nil)
        return file
    }

    /// A watcher starting over 2,100 hand-offs (twice and a bit its page) reads them a page at
    /// a time and holds those whose file can still be met: pending and failed ones, not those
    /// whose `after: delete` was applied.
    @Test(arguments: StoreKind.allCases)
    func aStartReadsTheHandOffsAPageAtATime(_ kind: StoreKind) throws {
        let watched = try watched()
        let store = try open(kind)
        try Self.makeFeedRun(store)
        let files = (0..<2_100).map {
            WatchedFile(watch: watched.identity, path: "shot\($0 % 7)/frame_\($0).dpx", size: 4096, mtimeNanoseconds: Int64($0))
        }
        for (i, file) in files.enumerated() {
            #expect(try store.handOver(file, as: .item(runID: "feed", stepID: "accept", id: "i\(i)", json: "{}", event: nil), events: []))
            if i % 3 != 2 { #expect(try store.finishHandOff(file, outcome: i % 3 == 0 ? .done : .left, events: [])) }
        }
        let handOver = try WatchHandOver(watched: watched, store: store, queue: "default", environment: [:])
        #expect(handOver.largestStartRead == WatchHandOver.startPage)
        for (i, file) in files.enumerated() {
            #expect(handOver.isSettledWith(file) == (i % 3 != 0), "\(file.path)")
        }
    }

    /// 300 files whose item is done among 900 handed over into one running feed run (300 failed,
    /// 300 still queued): one pass finishes the 600 ended ones (the done ones deleted, the failed
    /// ones left) in pages of at most `outcomePage`, and leaves the queued ones pending.
    @Test(arguments: StoreKind.allCases)
    func aPassReadsEndedHandOffsAPageAtATime(_ kind: StoreKind) throws {
        let watched = try watched()
        let store = try open(kind)
        let run = try Self.makeFeedRun(store)
        let handOver = try WatchHandOver(watched: watched, store: store, queue: "default", environment: [:])
        let count = 900
        for i in 0..<count {
            let relative = "f\(i).bin"
            try Data("frame \(i)".utf8).write(to: dir.file("in/" + relative))
            let file = handOver.key(relative, try #require(FileSignature.of(root: dir.file("in").path, relative: relative)))
            #expect(try store.handOver(file, as: .item(runID: "feed", stepID: "accept", id: "i\(i)", json: "{}", event: nil),
                                       events: []))
            if i % 3 != 2 {
                try store.finishItem(runID: "feed", stepID: "accept", id: "i\(i)", error: i % 3 == 0 ? nil : "refused",
                                     event: nil, fence: nil)
            }
        }

        var finished: [String: String] = [:]
        try handOver.settleOutcomes { event in
            if let path = event.data["path"]?.stringValue { finished[path] = event.data["after"]?.stringValue }
        }
        #expect(handOver.largestOutcomeRead == WatchHandOver.outcomePage)
        #expect(finished.count == 600)
        for i in 0..<count {
            let exists = FileManager.default.fileExists(atPath: dir.file("in/f\(i).bin").path)
            switch i % 3 {
            case 0: #expect(finished["f\(i).bin"] == "delete" && !exists)
            case 1: #expect(finished["f\(i).bin"] == "left" && exists)
            default: #expect(finished["f\(i).bin"] == nil && exists)
            }
        }
        #expect(try store.watchHandOffs(watch: watched.identity, pendingOnly: true).map(\.file.path).sorted()
            == (0..<count).filter { $0 % 3 == 2 }.map { "f\($0).bin" }.sorted())

        // The run ends: its queued items did not succeed, their files are left.
        var ended = run
        ended.status = .cancelled
        var batch = JournalBatch()
        batch.runUpdates = [ended]
        try store.commit(batch)
        finished = [:]
        try handOver.settleOutcomes { event in
            if let path = event.data["path"]?.stringValue { finished[path] = event.data["after"]?.stringValue }
        }
        #expect(finished.count == 300 && Set(finished.values) == ["left"])
        #expect(handOver.largestOutcomeRead <= WatchHandOver.outcomePage)
        #expect(try store.watchHandOffs(watch: watched.identity, pendingOnly: true).isEmpty)
    }

    /// The watched folder cannot be opened when a file's work succeeded (an automounted share
    /// gone for a while, or no descriptor left): its `after: delete` waits (tried again 1 s,
    /// then 2 s later…), and is applied once the folder is back, rather than recorded as "none"
    /// and never done.
    @Test(arguments: StoreKind.allCases)
    func anAfterActionWaitsForAWatchedFolderThatCannotBeOpened(_ kind: StoreKind) throws {
        let (watched, store, handOver) = try watching(kind)
        let file = try handedOverAndDone("f.bin", id: "i1", by: handOver, in: store)

        try FileManager.default.moveItem(atPath: dir.file("in").path, toPath: dir.file("in.away").path)
        var events: [EventRecord] = []
        #expect(throws: WatchHandOver.AfterFailed.self) { try handOver.settleOutcomes(now: 100) { events.append($0) } }
        try handOver.settleOutcomes(now: 100.5) { events.append($0) }  // not again yet: 1 s after the failure
        try handOver.settleOutcomes(now: 101) { events.append($0) }  // failing again: said once, so no throw
        #expect(events.isEmpty)
        #expect(try store.watchHandOffs(watch: watched.identity, pendingOnly: true).map(\.file) == [file])

        try FileManager.default.moveItem(atPath: dir.file("in.away").path, toPath: dir.file("in").path)
        try handOver.settleOutcomes(now: 102) { events.append($0) }  // not yet: 2 s after the second failure
        #expect(events.isEmpty)
        try handOver.settleOutcomes(now: 103.5) { events.append($0) }
        #expect(events.map { $0.data["after"]?.stringValue } == ["delete"])
        #expect(!FileManager.default.fileExists(atPath: dir.file("in/f.bin").path))
        #expect(try store.watchHandOffs(watch: watched.identity, pendingOnly: false).map(\.outcome) == [.removed])
    }

    /// Two serves apply `after: delete` to the same file at once: the one that finds the file
    /// gone between its look and its action (the other just deleted it) does not record "none"
    /// over the other's "delete" (which would keep the hand-off for good): it waits for the
    /// next look, and records "none" itself only if nobody else recorded meanwhile.
    @Test(arguments: StoreKind.allCases, ["delete", "move-to done"])
    func aFileAnotherServeJustDeletedIsLeftToItsRecord(_ kind: StoreKind, after: String) throws {
        let (watched, store, handOver) = try watching(kind, after: after)
        let files = [try handedOverAndDone("a.bin", id: "i0", by: handOver, in: store),
                     try handedOverAndDone("b.bin", id: "i1", by: handOver, in: store)]
        // The other serve deletes both just after this one looked; it records a.bin at once and
        // never gets to record b.bin (it was stopped).
        handOver.beforeAction = { file in try? FileManager.default.removeItem(atPath: self.dir.file("in/" + file.path).path) }
        var events: [EventRecord] = []
        try handOver.settleOutcomes(now: 100) { events.append($0) }  // no AfterFailed: a move finds it gone too
        #expect(events.isEmpty, "\(events.map(\.data))")
        #expect(handOver.versionsFoundGone == 2)
        #expect(try store.finishHandOff(files[0], outcome: .removed, events: []))
        handOver.beforeAction = { _ in }
        try handOver.settleOutcomes(now: 101) { events.append($0) }
        #expect(events.map { $0.data["path"]?.stringValue } == ["b.bin"])
        #expect(events.first?.data["after"]?.stringValue == WatchHandOver.changedOrGone)
        let outcomes = Dictionary(uniqueKeysWithValues: try store.watchHandOffs(watch: watched.identity, pendingOnly: false).map {
            ($0.file.path, $0.outcome)
        })
        #expect(outcomes == ["a.bin": .removed, "b.bin": .done])
        // Nothing is kept for a.bin, whose record is the other serve's: one entry a file would
        // add up over a long night of two serves.
        #expect(handOver.versionsFoundGone == 0)
    }

    /// The ends of the runs whose files `after:` deletes or moves are made durable before the
    /// first of them goes (SQLite's default commits survive `kill -9`, not a power cut): one
    /// fsync of the WAL for each page of ended hand-offs read (a later page may hold runs that
    /// ended after the sync), not one a file; a watch that keeps its files syncs nothing.
    @Test(arguments: ["delete", "move-to done", "keep"])
    func theJournalIsMadeDurableBeforeAFileIsRemoved(after: String) throws {
        let (_, store, handOver) = try watching(.sqlite, after: after)
        let sqlite = try #require(store as? SQLiteStateStore)
        let files = WatchHandOver.outcomePage + 2
        for i in 0 ..< files { _ = try handedOverAndDone("f\(i).bin", id: "i\(i)", by: handOver, in: store) }
        var syncsAtEachAction: [Int] = []
        handOver.beforeAction = { _ in syncsAtEachAction.append(sqlite.journalSyncs) }
        var events: [EventRecord] = []
        try handOver.settleOutcomes(now: 100) { events.append($0) }
        #expect(events.count == files)
        let expected = after == "keep" ? Array(repeating: 0, count: files)
            : Array(repeating: 1, count: WatchHandOver.outcomePage) + [2, 2]
        #expect(syncsAtEachAction == expected)
        #expect(FileManager.default.fileExists(atPath: dir.file("in/f0.bin").path) == (after == "keep"))
    }

    /// Another serve moves the file to the move-to folder between this one's check and its own
    /// move: this one's rename finds nothing to move, which is not a failure to warn about and
    /// try again (it was, in every night of two serves), but a file gone: left to the record.
    @Test(arguments: StoreKind.allCases)
    func aFileAnotherServeJustMovedIsNotAFailedMove(_ kind: StoreKind) throws {
        let (_, store, handOver) = try watching(kind, after: "move-to done")
        let file = try handedOverAndDone("f.bin", id: "i1", by: handOver, in: store)
        handOver.betweenCheckAndAction = { _ in
            try? FileManager.default.createDirectory(atPath: self.dir.file("in/done").path, withIntermediateDirectories: true)
            try? FileManager.default.moveItem(atPath: self.dir.file("in/f.bin").path, toPath: self.dir.file("in/done/f.bin").path)
        }
        var events: [EventRecord] = []
        try handOver.settleOutcomes(now: 100) { events.append($0) }
        #expect(events.isEmpty)
        #expect(try store.finishHandOff(file, outcome: .removed, events: []))  // the other serve's record
        try handOver.settleOutcomes(now: 101) { events.append($0) }
        #expect(events.isEmpty)
        #expect(FileManager.default.fileExists(atPath: dir.file("in/done/f.bin").path))
        #expect(!FileManager.default.fileExists(atPath: dir.file("in/done/f.bin.1").path))
    }

    /// A file whose folder was renamed or deleted when its work ends is gone with it: recorded
    /// as such (after a second look), not retried for good, which kept its run from ever being
    /// pruned.
    @Test(arguments: StoreKind.allCases)
    func aFileWhoseFolderWentIsRecordedGoneNotRetriedForGood(_ kind: StoreKind) throws {
        let (watched, store, handOver) = try watching(kind)
        try FileManager.default.createDirectory(atPath: dir.file("in/shot").path, withIntermediateDirectories: true)
        _ = try handedOverAndDone("shot/f.bin", id: "i1", by: handOver, in: store)
        try FileManager.default.moveItem(atPath: dir.file("in/shot").path, toPath: dir.file("elsewhere").path)
        var events: [EventRecord] = []
        try handOver.settleOutcomes(now: 100) { events.append($0) }
        try handOver.settleOutcomes(now: 101) { events.append($0) }
        #expect(events.map { $0.data["after"]?.stringValue } == [WatchHandOver.changedOrGone])
        #expect(try store.watchHandOffs(watch: watched.identity, pendingOnly: true).isEmpty)
    }
}
