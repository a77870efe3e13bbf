import Foundation
import OrchestrateJSON
import OrchestrateStore
import OrchestrateTestSupport
import Testing

/// The retention part of the `StateStore` contract, on both stores: which finished runs are
/// prunable, what goes with a pruned run, what a follower learns, what exactly-once keeps.
extension StoreUnderTest {
    /// Makes run `id` and finishes it `age` seconds ago (by the store's clock) as `status`.
    @discardableResult
    func finishedRun(_ id: String, age: Double, status: RunStatus = .succeeded, queue: String = "default",
                     retention: Double? = nil) throws -> RunRecord
    {
        var run = RunRecord(id: id, workflowName: "wf", workflowFile: "/wf.yaml", workflowSource: "name: wf",
                            inputs: [:], status: .running, createdAt: 1, runDir: RunRecord.runDirectory(for: id))
        run.queue = queue
        run.retention = retention
        try store.createRun(run, events: [EventRecord(runID: id, time: 1, type: .runAdded)])
        run.status = status
        run.finishedAt = try store.now() - age
        var batch = JournalBatch()
        batch.runUpdates = [run]
        batch.events = [EventRecord(runID: id, time: 2, type: .runFinished)]
        try store.commit(batch)
        return run
    }
}

@Suite(.serialized) struct RetentionStoreContractTests {
    static let day = 86_400.0

    @Test(arguments: StoreKind.allCases)
    func aPrunedRunGoesWithItsStepsEventsItemsAndCheckpoints(_ kind: StoreKind) throws {
        let t = try StoreUnderTest(kind)
        // A run with a step, a checkpoint, an item and progress, then finished 40 days ago.
        try t.makeRun("old", createdAt: 1)
        var step = StepRecord(runID: "old", id: "upload", step: "upload", kind: .step, status: .succeeded)
        step.attempt = 2
        var batch = JournalBatch()
        batch.stepUpserts = [step]
        batch.events = [EventRecord(runID: "old", time: 2, type: .stepProgress, step: "upload", data: ["bytes": 5])]
        try t.store.commit(batch)
        try t.store.saveCheckpoint(runID: "old", stepID: "upload", data: [1, 2, 3], fence: nil)
        try t.store.addItem(runID: "old", stepID: "accept", id: "i1", json: "{}",
                            event: EventRecord(runID: "old", time: 3, type: .itemAdded, step: "accept"))
        var old = try #require(try t.store.run("old"))
        old.status = .succeeded
        old.finishedAt = try t.store.now() - 40 * Self.day
        batch = JournalBatch()
        batch.runUpdates = [old]
        batch.events = [EventRecord(runID: "old", time: 4, type: .runFinished)]
        try t.store.commit(batch)
        try t.finishedRun("failed", age: 35 * Self.day, status: .failed)
        try t.finishedRun("recent", age: 2 * Self.day)
        // Unfinished runs created long ago: never prunable, whatever their age.
        try t.makeRun("busy", status: .running, createdAt: 1)
        try t.makeRun("waiting", status: .queued, createdAt: 1)
        try t.makeRun("held", status: .paused, createdAt: 1)
        let oldSeqs = try t.store.storedEvents(runID: "old", afterSeq: 0, limit: 100).map(\.seq)
        #expect(oldSeqs.count == 4)

        // The default retention (30 days) selects the two old finished runs, oldest first.
        #expect(try t.store.prunableRuns(PruneRule(), limit: 10).map(\.id) == ["old", "failed"])
        #expect(try t.store.prunableRuns(PruneRule(), limit: 1).map(\.id) == ["old"])
        #expect(try t.store.prunableRuns(PruneRule(statuses: [.failed]), limit: 10).map(\.id) == ["failed"])
        #expect(try t.store.prunableRuns(PruneRule(statuses: [.running, .queued]), limit: 10).isEmpty)
        #expect(try t.store.prunableRuns(PruneRule(olderThan: 1 * Self.day), limit: 10).map(\.id) == ["old", "failed", "recent"])
        #expect(try t.store.prunedThrough() == 0)

        // Asked for unfinished runs too, it removes only the finished one.
        let pruned = try t.store.pruneRuns(["old", "busy", "waiting", "held", "nope"])
        #expect(pruned.map(\.id) == ["old"])
        #expect(pruned.first?.runDir == "runs/old" && pruned.first?.status == .succeeded)
        #expect(try t.store.run("old") == nil)
        #expect(try t.store.steps(ofRun: "old").isEmpty)
        #expect(try t.store.items(runID: "old").isEmpty)
        #expect(try t.store.checkpoint(runID: "old", stepID: "upload") == nil)
        #expect(try t.store.storedEvents(runID: "old", afterSeq: 0, limit: 100).isEmpty)
        #expect(try t.store.latestProgress(runID: "old").isEmpty)
        for id in ["busy", "waiting", "held", "failed", "recent"] { #expect(try t.store.run(id) != nil) }

        // A follower is told: the highest seq removed, and a `runs.pruned` event above it naming the run.
        let through = try #require(oldSeqs.max())
        #expect(try t.store.prunedThrough() == through)
        #expect(try t.reopen().prunedThrough() == through)
        let notice = try #require(try t.store.storedEvents(runID: nil, afterSeq: 0, limit: 1000).last)
        #expect(notice.type == .runsPruned && notice.runID == nil && notice.seq > through)
        #expect(notice.record.data["runs"] == ["old"])
        #expect(notice.record.data["through"]?.intValue == through)
        // Seqs are never handed out again.
        try t.store.appendEvents([EventRecord(runID: "recent", time: 5, type: .stepLog)])
        #expect(try t.store.storedEvents(runID: "recent", afterSeq: 0, limit: 10).last!.seq > notice.seq)

        // Pruning again removes nothing more and keeps the mark.
        #expect(try t.store.pruneRuns(["old"]).isEmpty)
        #expect(try t.store.pruneRuns(["failed"]).map(\.id) == ["failed"])
        #expect(try t.store.prunedThrough() > through)
    }

    @Test(arguments: StoreKind.allCases)
    func theStoreWideQueueAndWorkflowPeriodsDecide(_ kind: StoreKind) throws {
        let t = try StoreUnderTest(kind)
        #expect(try t.store.retentionSettings() == RetentionSettings())
        try t.store.setRetention(2 * Self.day, queue: nil)
        try t.store.setRetention(RetentionSettings.forever, queue: "archive")
        try t.store.setRetention(3_600, queue: "scratch")
        let settings = try t.reopen().retentionSettings()
        #expect(settings == RetentionSettings(storeWide: 2 * Self.day, queues: ["archive": .infinity, "scratch": 3_600]))

        try t.finishedRun("a", age: 3 * Self.day)                                   // store-wide 2d: past it
        try t.finishedRun("b", age: 400 * Self.day, queue: "archive")               // the queue keeps it forever
        try t.finishedRun("c", age: 2 * 3_600, status: .cancelled, queue: "scratch") // the queue's 1h: past it
        try t.finishedRun("d", age: 1 * Self.day)                                   // within 2d
        try t.finishedRun("e", age: 3 * Self.day, retention: 7 * Self.day)          // its workflow's 7d wins
        try t.finishedRun("f", age: 2 * 3_600, queue: "archive", retention: 3_600)  // its workflow's 1h wins
        try t.finishedRun("g", age: 9 * Self.day, queue: "scratch", retention: .infinity)  // workflow: off
        let rule = PruneRule(settings: settings)
        #expect(Set(try t.store.prunableRuns(rule, limit: 100).map(\.id)) == ["a", "c", "f"])
        // By hand, the age alone decides.
        #expect(Set(try t.store.prunableRuns(PruneRule(olderThan: 1.5 * Self.day, settings: settings), limit: 100).map(\.id))
            == ["a", "b", "e", "g"])

        try t.store.setRetention(nil, queue: "scratch")
        try t.store.setRetention(nil, queue: nil)
        #expect(try t.store.retentionSettings() == RetentionSettings(queues: ["archive": .infinity]))
    }

    @Test(arguments: StoreKind.allCases)
    func pruningKeepsScheduleClaimsAndWatchHandOffs(_ kind: StoreKind) throws {
        let t = try StoreUnderTest(kind)
        // A schedule's due time claimed with its run; the run finishes and is pruned.
        try t.store.saveSchedule(t.scheduleEntries(count: 1))
        #expect(try t.store.advanceSchedule(name: "nightly", entry: 1, from: 1_000, to: 1_060,
                                            run: t.scheduledRun("s1"), events: []))
        var s1 = try #require(try t.store.run("s1"))
        s1.status = .succeeded
        s1.finishedAt = try t.store.now() - 60 * Self.day
        var batch = JournalBatch()
        batch.runUpdates = [s1]
        try t.store.commit(batch)
        #expect(try t.store.pruneRuns(["s1"]).map(\.id) == ["s1"])
        // The claim stays: the same due time is never fired again, by this process or another.
        #expect(try !t.reopen().advanceSchedule(name: "nightly", entry: 1, from: 1_000, to: 1_060,
                                                 run: t.scheduledRun("s1-again"), events: []))
        #expect(try t.store.run("s1-again") == nil)
        #expect(try t.store.schedules().first?.lastDue == 1_060)

        // A watched file handed over as a run: kept while its hand-off is pending.
        let file = WatchedFile(watch: "node/wf/in", path: "a.mov", size: 10, mtimeNanoseconds: 1_000)
        var w1 = RunRecord(id: "w1", workflowName: "wf", workflowFile: "/wf.yaml", workflowSource: "name: wf", inputs: [:],
                           status: .queued, createdAt: 1, runDir: RunRecord.runDirectory(for: "w1"))
        #expect(try t.store.handOver(file, as: .run(w1, events: []), events: []))
        w1.status = .succeeded
        w1.finishedAt = try t.store.now() - 60 * Self.day
        batch = JournalBatch()
        batch.runUpdates = [w1]
        try t.store.commit(batch)
        #expect(try t.store.prunableRuns(PruneRule(), limit: 10).isEmpty)
        #expect(try t.store.pruneRuns(["w1"]).isEmpty)
        #expect(try t.store.finishHandOff(file, outcome: .done, events: []))
        #expect(try t.store.prunableRuns(PruneRule(), limit: 10).map(\.id) == ["w1"])
        #expect(try t.store.pruneRuns(["w1"]).map(\.id) == ["w1"])
        // The hand-off stays: that version of the file never becomes work again.
        let w2 = RunRecord(id: "w2", workflowName: "wf", workflowFile: "/wf.yaml", workflowSource: "name: wf", inputs: [:],
                           status: .queued, createdAt: 1, runDir: RunRecord.runDirectory(for: "w2"))
        #expect(try !t.reopen().handOver(file, as: .run(w2, events: []), events: []))
        #expect(try t.store.run("w2") == nil)
        #expect(try t.store.watchHandOffs(watch: "node/wf/in", pendingOnly: false).map(\.runID) == ["w1"])
    }

    /// A hand-off whose file the watch deleted or moved away (`removed`) goes with its run, when
    /// it is pruned or deleted: the store stops growing with every file a delete watch ever
    /// took. The others (`done`, `left`: the file may still be there) stay, and so does one
    /// whose file was put back before its run went.
    @Test(arguments: StoreKind.allCases)
    func aHandOffWhoseFileWasRemovedGoesWithItsRun(_ kind: StoreKind) throws {
        let t = try StoreUnderTest(kind)
        let watch = "node/wf/in"
        func handOff(_ path: String, run id: String, outcome: WatchHandOff.Outcome) throws -> WatchedFile {
            let file = WatchedFile(watch: watch, path: path, size: 10, mtimeNanoseconds: 1_000)
            var run = RunRecord(id: id, workflowName: "wf", workflowFile: "/wf.yaml", workflowSource: "name: wf", inputs: [:],
                                status: .queued, createdAt: 1, runDir: RunRecord.runDirectory(for: id))
            #expect(try t.store.handOver(file, as: .run(run, events: []), events: []))
            run.status = .succeeded
            run.finishedAt = try t.store.now() - 60 * Self.day
            var batch = JournalBatch()
            batch.runUpdates = [run]
            try t.store.commit(batch)
            #expect(try t.store.finishHandOff(file, outcome: outcome, events: []))
            return file
        }
        let removed = try handOff("removed.mov", run: "r1", outcome: .removed)
        _ = try handOff("kept.mov", run: "r2", outcome: .done)
        _ = try handOff("failed.mov", run: "r3", outcome: .left)
        let deleted = try handOff("deleted.mov", run: "r4", outcome: .removed)
        let recent = try handOff("recent.mov", run: "r5", outcome: .removed)
        // Put back by its sender before its run went (an hourly `rsync -t`): taken for the file
        // already handed over, creating nothing, and kept from then on.
        let putBack = try handOff("put-back.mov", run: "r6", outcome: .removed)
        let r7 = RunRecord(id: "r7", workflowName: "wf", workflowFile: "/wf.yaml", workflowSource: "name: wf", inputs: [:],
                           status: .queued, createdAt: 1, runDir: RunRecord.runDirectory(for: "r7"))
        #expect(try !t.store.handOver(putBack, as: .run(r7, events: []), events: []))
        #expect(try t.store.run("r7") == nil)
        #expect(try t.store.pruneRuns(["r1", "r2", "r3", "r6"]).map(\.id).sorted() == ["r1", "r2", "r3", "r6"])
        try t.store.deleteRun("r4")
        #expect(try t.store.watchHandOffs(watch: watch, pendingOnly: false).map(\.file.path).sorted()
                    == ["failed.mov", "kept.mov", "put-back.mov", "recent.mov"])
        #expect(try t.store.watchHandOffs(watch: watch, pendingOnly: false).first { $0.file == putBack }?.outcome == .done)
        #expect(try t.store.watchHandOffs(watch: watch, pendingOnly: false).first { $0.file == recent }?.outcome == .removed)
        // The same version dropped in again is new work once its run is gone.
        for (file, id) in [(removed, "again1"), (deleted, "again4")] {
            let again = RunRecord(id: id, workflowName: "wf", workflowFile: "/wf.yaml", workflowSource: "name: wf", inputs: [:],
                                  status: .queued, createdAt: 1, runDir: RunRecord.runDirectory(for: id))
            #expect(try t.reopen().handOver(file, as: .run(again, events: []), events: []))
        }
    }

    /// SQLite gives the pages of pruned runs back to the file system (`auto_vacuum =
    /// INCREMENTAL`, set when the store is created).
    @Test func aNewSQLiteStoreShrinksBackAfterPruning() throws {
        let t = try StoreUnderTest(.sqlite)
        let sqlite = try #require(t.store as? SQLiteStateStore)
        #expect(try sqlite.vacuumsIncrementally())
        let payload = JSONValue.string(String(repeating: "x", count: 2_000))
        for n in 0..<300 {
            let id = "run-\(n)"
            try t.finishedRun(id, age: 40 * Self.day)
            try t.store.appendEvents((0..<10).map { _ in EventRecord(runID: id, time: 3, type: .stepLog, data: ["line": payload]) })
        }
        let full = try sqlite.databaseBytes()
        #expect(full > 5_000_000)
        var pruned = 0
        while true {
            let batch = try t.store.prunableRuns(PruneRule(), limit: 100)
            if batch.isEmpty { break }
            pruned += try t.store.pruneRuns(batch.map(\.id)).count
        }
        #expect(pruned == 300)
        #expect(try sqlite.databaseBytes() > full / 2)  // freed, not yet given back
        var rounds = 0
        while try t.store.reclaimSpace(maxPages: 256) { rounds += 1 }
        #expect(rounds > 1)  // a few pages per write, not all at once
        #expect(try sqlite.databaseBytes() < full / 10)
        #expect(try sqlite.integrityCheck() == "ok")
    }
}
