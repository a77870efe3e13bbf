import Foundation
import OrchestrateJSON
import OrchestrateStore
import OrchestrateTestSupport
import Testing

/// The reads that must cost the same with a million runs (bench/scale/million.py), on both
/// stores: lists filtered and cut in the store, counts kept by the store as runs change, and
/// claims that read the runs they take. Correct first, then not proportional to the runs held.
@Suite(.serialized) struct ScaleStoreContractTests {
    /// What the counts must be: every run counted by its stored status.
    static func recount(_ store: any StateStore) throws -> [QueueFigures.Count] {
        var counts: [String: [RunStatus: Int]] = [:]
        for run in try store.listRuns(RunFilter()) { counts[run.queue, default: [:]][run.status, default: 0] += 1 }
        return QueueFigures(runs: counts.flatMap { queue, byStatus in
            byStatus.map { QueueFigures.Count(queue: queue, status: $0.key, runs: $0.value) }
        }, oldestQueued: [:], heldSteps: 0).runs
    }

    /// The counts follow every way a run's status changes or a run goes: created, claimed,
    /// started, failed, finished, queued again (`retry`), moved back (`stop`), deleted, pruned.
    @Test(arguments: StoreKind.allCases)
    func countsFollowEveryChangeOfARun(_ kind: StoreKind) throws {
        let t = try StoreUnderTest(kind)
        func check(_ when: String) throws {
            let figures = try t.store.queueFigures()
            #expect(figures.runs == (try Self.recount(t.store)), "\(when)")
        }
        try check("empty")
        for i in 0..<6 { try t.makeRun("q\(i)", status: .queued, createdAt: Double(10 + i)) }
        try t.makeRun("u1", queue: "uploads", status: .queued, createdAt: 3)
        try check("created")
        #expect(try t.store.queueFigures().oldestQueued == ["default": 10, "uploads": 3])

        let owner = OwnerIdentity.current
        let claimed = try t.store.claimNextRuns(owner: owner, queues: ["default"], limit: 3, lease: 60)
        #expect(claimed.map(\.id) == ["q0", "q1", "q2"])
        try check("claimed")
        // Started, then one fails, one succeeds, one is finished by its last commit with release.
        var batch = JournalBatch()
        batch.runUpdates = claimed.map { var run = $0; run.status = .running; return run }
        try t.store.commit(batch)
        try check("started")
        for (run, status) in zip(claimed, [RunStatus.failed, .succeeded, .cancelled]) {
            var finished = run
            finished.status = status
            finished.finishedAt = try t.store.now() - 100
            var last = JournalBatch()
            last.fence = (run.id, owner)
            last.releasesRun = true
            last.runUpdates = [finished]
            try t.store.commit(last)
        }
        try check("finished")
        #expect(try t.store.queueFigures().oldestQueued == ["default": 13, "uploads": 3])
        // `retry` and `stop` change the status through the queue's fields.
        try t.store.updateQueueFields("q0", status: .queued, queueOrder: 99, runNow: nil)
        try t.store.updateQueueFields("q3", status: .paused, queueOrder: nil, runNow: true)
        try check("queued again and paused")
        try t.store.deleteRun("q1")
        try check("deleted")
        let prunable = try t.store.prunableRuns(PruneRule(olderThan: 10), limit: 10)
        #expect(prunable.map(\.id) == ["q2"])
        _ = try t.store.pruneRuns(prunable.map(\.id))
        try check("pruned")
        // Another store object on the same data (another process) sees the same counts.
        #expect(try t.reopen().queueFigures() == (try t.store.queueFigures()))
    }

    /// A limit keeps the newest runs that match every filter, listed oldest first; each
    /// filter is applied before the limit, not after.
    @Test(arguments: StoreKind.allCases)
    func listsFilterBeforeTheyKeepTheNewest(_ kind: StoreKind) throws {
        let t = try StoreUnderTest(kind)
        // Created out of order; ids tie-break equal times.
        let made: [(id: String, workflow: String, status: RunStatus, created: Double, labels: [String: String])] = [
            ("a1", "ingest", .failed, 5, ["team": "Media"]), ("a2", "ingest", .succeeded, 1, ["team": "news"]),
            ("b1", "publish", .failed, 3, [:]), ("b2", "publish", .failed, 9, ["team": "media"]),
            ("b3", "ingest", .failed, 9, [:]), ("c1", "ingest", .queued, 7, ["batch": "7"]),
        ]
        for m in made {
            let run = RunRecord(id: m.id, workflowName: m.workflow, workflowFile: "/w/\(m.workflow).yaml", workflowSource: "",
                                inputs: [:], status: m.status, createdAt: m.created, runDir: RunRecord.runDirectory(for: m.id),
                                labels: m.labels)
            try t.store.createRun(run, events: [])
        }
        func ids(_ filter: RunFilter) throws -> [String] { try t.store.listRuns(filter).map(\.id) }
        #expect(try ids(RunFilter()) == ["a2", "b1", "a1", "c1", "b2", "b3"])
        #expect(try ids(RunFilter(limit: 2)) == ["b2", "b3"])
        #expect(try ids(RunFilter(statuses: [.failed], limit: 3)) == ["a1", "b2", "b3"])
        #expect(try ids(RunFilter(statuses: [.failed, .queued], limit: 3)) == ["c1", "b2", "b3"])
        #expect(try ids(RunFilter(workflow: "publish", limit: 1)) == ["b2"])
        #expect(try ids(RunFilter(statuses: [.failed], workflow: "ingest")) == ["a1", "b3"])
        #expect(try ids(RunFilter(labels: ["team": "media"], limit: 5)) == ["b2"])
        #expect(try ids(RunFilter(labels: ["team": "media", "x": "y"])) == [])
        var prefixed = RunFilter(limit: 2)
        prefixed.idPrefixes = ["a", "c"]
        #expect(try ids(prefixed) == ["a1", "c1"])
        var text = RunFilter(limit: 10)
        text.text = "media"  // a label's value, in any case
        #expect(try ids(text) == ["a1", "b2"])
        text.text = "publish.yaml"  // the workflow's file
        #expect(try ids(text) == ["b1", "b2"])
        text.text = "batch"  // a label's key
        #expect(try ids(text) == ["c1"])
        #expect(try ids(RunFilter(statuses: [.cancelled], limit: 5)) == [])
    }

    /// Reads whose answer is small stay small with many runs: a list with a limit and a claim
    /// of one run each take a fraction of what reading every run takes (before, each read them
    /// all: the limit was applied after, a SQLite claim sorted the whole queue). Best of five,
    /// so a busy machine slows both sides alike. (The counts are kept by the store, by
    /// construction: `countsFollowEveryChangeOfARun` checks them.)
    @Test(arguments: StoreKind.allCases)
    func smallAnswersDoNotReadEveryRun(_ kind: StoreKind) throws {
        let t = try StoreUnderTest(kind)
        let total = 12_000
        let runs = (0..<total).map { i -> (run: RunRecord, events: [EventRecord]) in
            let status: RunStatus = i % 2 == 0 ? .queued : i % 10 == 1 ? .failed : .succeeded
            return (RunRecord(id: "r\(i)", workflowName: "wf\(i % 4)", workflowFile: "/wf.yaml", workflowSource: "",
                              inputs: [:], status: status, createdAt: Double(i), runDir: "runs/r\(i)"), [])
        }
        try t.store.createRuns(runs)
        // PostgreSQL folds 12,000 changes at once here, and vacuums what that left behind.
        #expect(try t.store.queueFigures().runs == (try Self.recount(t.store)))
        #expect(try t.store.queueFigures().runs == (try Self.recount(t.store)))
        func best(_ work: () throws -> Void) throws -> Double {
            var times: [Double] = []
            for _ in 0..<5 {
                let start = DispatchTime.now().uptimeNanoseconds
                try work()
                times.append(Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9)
            }
            return times.min()!
        }
        let everyRun = try best { _ = try t.store.listRuns(RunFilter()) }
        let everyQueued = try best { _ = try t.store.listRuns(RunFilter(statuses: [.queued])) }
        var counted: [Int] = []
        let failedList = try best { counted.append(try t.store.listRuns(RunFilter(statuses: [.failed], limit: 50)).count) }
        let workflowList = try best { counted.append(try t.store.listRuns(RunFilter(workflow: "wf3", limit: 50)).count) }
        // A claim and its undoing (a claim of a live owner's run is refused, so each round
        // claims a new one: at most five of the 6,000 queued).
        let claim = try best { counted.append(try t.store.claimNextRuns(owner: .current, queues: ["default"], limit: 1, lease: 60).count) }
        #expect(counted == Array(repeating: 50, count: 10) + Array(repeating: 1, count: 5))
        #expect(failedList < everyRun / 10, "list --status failed --limit 50: \(failedList) s; every run: \(everyRun) s")
        #expect(workflowList < everyRun / 10, "list --workflow --limit 50: \(workflowList) s; every run: \(everyRun) s")
        #expect(claim < everyQueued / 10, "claim of one run: \(claim) s; every queued run: \(everyQueued) s")
    }
}
