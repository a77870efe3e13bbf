import Foundation
import OrchestrateJSON
import OrchestrateStore
import OrchestrateTestSupport
import Testing

/// The `StateStore` contract (StateStore.swift), the same tests on both implementations: SQLite
/// in a temporary directory, PostgreSQL in a fresh database of a throwaway cluster.
enum StoreKind: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case sqlite, postgres
    var testDescription: String { rawValue }
}

/// One empty store of a kind, and a way to open the same store again (another process's view).
final class StoreUnderTest: @unchecked Sendable {
    let kind: StoreKind
    let dir = TemporaryDirectory("store")
    let location: StoreLocation
    let store: any StateStore

    init(_ kind: StoreKind) throws {
        self.kind = kind
        switch kind {
        case .sqlite: location = .sqlite(directory: dir.file("state").path)
        case .postgres: location = .postgres(connection: try PostgresServer.shared().createDatabase())
        }
        store = try StoreOpening.open(location)
    }

    /// Another store object on the same data: what a second process sees.
    func reopen() throws -> any StateStore { try StoreOpening.open(location) }

    @discardableResult
    func makeRun(_ id: String = "r1", queue: String = "default", status: RunStatus = .running, priority: Int = 0,
                 createdAt: Double = 1) throws -> RunRecord
    {
        var run = RunRecord(id: id, workflowName: "wf", workflowFile: "/wf.yaml", workflowSource: "name: wf",
                            inputs: ["a": 1], status: status, createdAt: createdAt, runDir: RunRecord.runDirectory(for: id),
                            priority: priority, labels: ["team": "media"])
        run.queue = queue
        try store.createRun(run, events: [EventRecord(runID: id, time: 1, type: .runAdded)])
        return run
    }
}

/// An identity of a process of this node that existed and is now gone.
func deadOwner() throws -> OwnerIdentity {
    let child = try ChildProcess.run(URL(fileURLWithPath: "/bin/sh"), ["-c", "echo $$"])
    let pid = Int32(child.stdout.trimmingCharacters(in: .whitespacesAndNewlines))!
    return OwnerIdentity(node: NodeName.current, pid: pid, startTime: 12345)
}

@Suite(.serialized) struct StoreContractTests {
    @Test(arguments: StoreKind.allCases)
    func runsRoundTripAndFilter(_ kind: StoreKind) throws {
        let t = try StoreUnderTest(kind)
        var run = try t.makeRun()
        try t.makeRun("r2", queue: "uploads")
        #expect(throws: StoreError.self) { try t.makeRun("r2") }
        run.status = .succeeded
        run.outputs = ["video": "/videos/1"]
        var batch = JournalBatch()
        batch.runUpdates = [run]
        try t.store.commit(batch)
        let loaded = try #require(try t.store.run("r1"))
        #expect(loaded.status == .succeeded)
        #expect(loaded.outputs == ["video": "/videos/1"])
        #expect(loaded.inputs == ["a": 1])
        #expect(loaded.labels == ["team": "media"])
        #expect(loaded.runDir == "runs/r1" && loaded.queue == "default")
        #expect(try t.store.run("nope") == nil)
        #expect(try t.store.listRuns(RunFilter(statuses: [.succeeded])).map(\.id) == ["r1"])
        #expect(try t.store.listRuns(RunFilter(labels: ["team": "media"])).count == 2)
        #expect(try t.store.listRuns(RunFilter(labels: ["team": "other"])).isEmpty)
        #expect(try t.store.listRuns(RunFilter(queues: ["uploads"])).map(\.id) == ["r2"])
    }

    /// The figures `/metrics` reads: counts per queue and status, the oldest queued run per
    /// queue, held steps.
    @Test(arguments: StoreKind.allCases)
    func queueFiguresCountRunsAndHeldSteps(_ kind: StoreKind) throws {
        let t = try StoreUnderTest(kind)
        #expect(try t.store.queueFigures() == QueueFigures(runs: [], oldestQueued: [:], heldSteps: 0))
        try t.makeRun("q1", status: .queued, createdAt: 5)
        try t.makeRun("q2", status: .queued, createdAt: 3)
        try t.makeRun("u1", queue: "uploads", status: .queued, createdAt: 9)
        try t.makeRun("u2", queue: "uploads", status: .running, createdAt: 1)
        var step = StepRecord(runID: "u2", id: "put", step: "put", kind: .step, status: .held)
        var batch = JournalBatch()
        batch.stepUpserts = [step]
        step.id = "other"
        step.status = .running
        batch.stepUpserts.append(step)
        try t.store.commit(batch)
        let figures = try t.store.queueFigures()
        #expect(figures.runs == [QueueFigures.Count(queue: "default", status: .queued, runs: 2),
                                 QueueFigures.Count(queue: "uploads", status: .queued, runs: 1),
                                 QueueFigures.Count(queue: "uploads", status: .running, runs: 1)])
        #expect(figures.oldestQueued == ["default": 3, "uploads": 9])
        #expect(figures.heldSteps == 1)
    }

    /// Nodes are known by the runs their processes hold and by their workers' start and stop
    /// events: a live holder counts, a dead one does not; a stopped worker disappears; a worker
    /// that vanished without stopping stays, not live.
    @Test(arguments: StoreKind.allCases)
    func nodesAreKnownByTheirRunsAndWorkers(_ kind: StoreKind) throws {
        let t = try StoreUnderTest(kind)
        #expect(try t.store.nodes().isEmpty)
        for id in ["r1", "r2", "r3"] { try t.makeRun(id, status: .queued) }
        let me = OwnerIdentity.current
        let remote = OwnerIdentity(node: "edit-bay-3", pid: 4242, startTime: 7)
        let dead = try deadOwner()
        #expect(try t.store.claimRun("r1", owner: me, lease: 60))
        #expect(try t.store.claimRun("r2", owner: remote, lease: 60))
        #expect(try t.store.claimRun("r3", owner: dead, lease: 60))
        func worker(_ type: EventType, _ owner: OwnerIdentity) -> EventRecord {
            EventRecord(runID: nil, time: 10, type: type, data: ["node": .string(owner.node), "pid": .int(Int64(owner.pid)),
                                                                 "start_time": .int(owner.startTime), "queues": ["default"]])
        }
        let stopped = OwnerIdentity(node: "edit-bay-3", pid: 4343, startTime: 8)
        try t.store.appendEvents([worker(.workerStarted, me), worker(.workerStarted, dead), worker(.workerStarted, remote),
                                  worker(.workerStarted, stopped), worker(.workerStopped, stopped)])

        let nodes = try t.store.nodes()
        #expect(nodes.map(\.name) == [NodeName.current, "edit-bay-3"].sorted())
        let local = try #require(nodes.first { $0.name == NodeName.current })
        #expect(local.live && local.runsHeld == 1)
        #expect(try #require(local.leaseUntil) > t.store.now() + 30)
        #expect(Set(local.workers.map(\.pid)) == [me.pid, dead.pid])
        #expect(local.workers.first { $0.pid == me.pid }?.live == true && local.workers.first { $0.pid == dead.pid }?.live == false)
        #expect(local.workers.first?.queues == ["default"])
        let other = try #require(nodes.first { $0.name == "edit-bay-3" })
        #expect(other.live && other.runsHeld == 1 && other.workers.map(\.pid) == [remote.pid])
        #expect(other.lastWorkerEvent == 10)

        // The remote owner gives its run up: the node is still known (by its worker), holding nothing.
        try t.store.releaseRun("r2", owner: remote)
        let after = try #require(try t.store.nodes().first { $0.name == "edit-bay-3" })
        #expect(after.runsHeld == 0 && after.leaseUntil == nil && after.workers.count == 1)
    }

    @Test(arguments: StoreKind.allCases)
    func aBatchOfRunsIsCreatedWholeOrNotAtAll(_ kind: StoreKind) throws {
        let t = try StoreUnderTest(kind)
        func record(_ id: String) -> (run: RunRecord, events: [EventRecord]) {
            (RunRecord(id: id, workflowName: "wf", workflowFile: "/wf.yaml", workflowSource: "", inputs: [:], status: .queued,
                       createdAt: 1, runDir: RunRecord.runDirectory(for: id)), [EventRecord(runID: id, time: 1, type: .runAdded)])
        }
        try t.store.createRuns((0..<50).map { record("b\($0)") })
        #expect(try t.store.listRuns(RunFilter()).count == 50)
        #expect(try t.store.events(runID: nil, afterSeq: 0, limit: 100).count == 50)
        // One id taken: nothing of the batch is created.
        #expect(throws: StoreError.self) { try t.store.createRuns([record("c1"), record("b7"), record("c2")]) }
        #expect(try t.store.run("c1") == nil && t.store.run("c2") == nil)
        #expect(try t.store.events(runID: nil, afterSeq: 0, limit: 100).count == 50)
    }

    @Test(arguments: StoreKind.allCases)
    func stepsCheckpointsAndEventsAreJournaled(_ kind: StoreKind) throws {
        let t = try StoreUnderTest(kind)
        try t.makeRun()
        var step = StepRecord(runID: "r1", id: "upload", step: "upload", kind: .step, status: .running)
        step.attempt = 2
        step.failures = 1
        step.idempotencyKey = "r1/upload"
        step.node = "bay-1"
        var batch = JournalBatch()
        // Two versions of one step in a batch: the last one wins.
        var earlier = step
        earlier.attempt = 1
        batch.stepUpserts = [earlier, step]
        batch.events = [EventRecord(runID: "r1", time: 2, type: .stepStarted, step: "upload", data: ["attempt": 2])]
        try t.store.commit(batch)
        let checkpoint: [UInt8] = Array("offset=42".utf8) + [0, 255, 92, 120]
        try t.store.saveCheckpoint(runID: "r1", stepID: "upload", data: checkpoint, fence: nil)
        try t.store.saveCheckpoint(runID: "r1", stepID: "upload", data: checkpoint + [7], fence: nil)
        let steps = try t.store.steps(ofRun: "r1")
        #expect(steps.count == 1)
        #expect(steps[0].attempt == 2 && steps[0].failures == 1 && steps[0].idempotencyKey == "r1/upload")
        #expect(steps[0].node == "bay-1")
        #expect(try t.store.checkpoint(runID: "r1", stepID: "upload") == checkpoint + [7])
        #expect(try t.store.checkpoint(runID: "r1", stepID: "other") == nil)
        let events = try t.store.events(runID: "r1", afterSeq: 0, limit: 10)
        #expect(events.map(\.type) == [.runAdded, .stepStarted])
        #expect(events[1].data == ["attempt": 2])
        #expect(try t.store.events(runID: "r1", afterSeq: events[0].seq, limit: 10).count == 1)
        // The latest progress of each step.
        try t.store.appendEvents([
            EventRecord(runID: "r1", time: 3, type: .stepProgress, step: "upload", data: ["bytes_done": 1]),
            EventRecord(runID: "r1", time: 4, type: .stepProgress, step: "upload", data: ["bytes_done": 2]),
            EventRecord(runID: "r1", time: 4, type: .stepProgress, step: "other", data: ["bytes_done": 9]),
        ])
        #expect(try t.store.latestProgress(runID: "r1").map { $0.data["bytes_done"] } == [2, 9])
        // Of several runs in one read: the same events, by run; runs without progress absent.
        try t.makeRun("r2")
        try t.makeRun("quiet")
        try t.store.appendEvents([EventRecord(runID: "r2", time: 5, type: .stepProgress, step: "upload", data: ["bytes_done": 4])])
        let byRun = try t.store.latestProgress(runIDs: ["r1", "r2", "quiet", "nope"])
        #expect(byRun.keys.sorted() == ["r1", "r2"])
        #expect(byRun["r1"]?.map(\.seq) == (try t.store.latestProgress(runID: "r1")).map(\.seq))
        #expect(byRun["r2"]?.map { $0.data["bytes_done"] } == [4])
        #expect(try t.store.latestProgress(runIDs: []).isEmpty)
        // More runs than SQLite binds in one statement.
        let many = (0..<1200).map { "x\($0)" } + ["r2"]
        #expect(try t.store.latestProgress(runIDs: many).keys.sorted() == ["r2"])
        // Ids are data, whatever they hold.
        let odd = "r\"3\\', [é"
        try t.makeRun(odd)
        try t.store.appendEvents([EventRecord(runID: odd, time: 6, type: .stepProgress, step: "s", data: ["bytes_done": 5])])
        #expect(try t.store.latestProgress(runIDs: [odd, "r2"]).mapValues { $0.map { $0.data["bytes_done"] } } == [odd: [5], "r2": [4]])
    }

    /// Every field of a run comes back as written, by each read of runs (one run, a list, a
    /// claim): the SQLite store reads runs by column position, so a column out of place shows here.
    @Test(arguments: StoreKind.allCases)
    func everyRunFieldRoundTrips(_ kind: StoreKind) throws {
        let t = try StoreUnderTest(kind)
        var run = RunRecord(id: "r\"1", workflowName: "wf é", workflowFile: "/w/wf.yaml", workflowSource: "name: wf\n",
                            inputs: ["path": "/a b", "n": 3], status: .queued, createdAt: 1_700_000_000.5,
                            runDir: "/state/runs/r1", priority: -2, labels: ["team": "media", "show": "<b>"])
        run.queue = "uploads"
        run.queueOrder = 1_700_000_001.25
        run.maxRate = 8_000_000
        run.maxRateTimetable = "09:00-17:00 1M"
        try t.store.createRun(run, events: [])
        var update = run
        update.status = .running
        update.ending = .cancelled
        update.startedAt = 1_700_000_002.5
        update.finishedAt = 1_700_000_003.75
        update.error = "503 🎬"
        update.outputs = ["url": "https://x/y"]
        var batch = JournalBatch()
        batch.runUpdates = [update]
        try t.store.commit(batch)
        try t.store.requestControl(run.id, control: .pause)
        try t.store.updateQueueFields(run.id, status: nil, queueOrder: nil, runNow: true)

        func expectEveryField(_ read: RunRecord?, _ owned: Bool) {
            #expect(read?.id == run.id && read?.workflowName == "wf é" && read?.workflowFile == "/w/wf.yaml")
            #expect(read?.workflowSource == "name: wf\n" && read?.inputs == ["path": "/a b", "n": 3])
            #expect(read?.status == .running && read?.ending == .cancelled && read?.createdAt == 1_700_000_000.5)
            #expect(read?.runDir == "/state/runs/r1" && read?.priority == -2 && read?.labels == ["team": "media", "show": "<b>"])
            #expect(read?.startedAt == 1_700_000_002.5 && read?.finishedAt == 1_700_000_003.75 && read?.error == "503 🎬")
            #expect(read?.outputs == ["url": "https://x/y"] && read?.queue == "uploads" && read?.queueOrder == 1_700_000_001.25)
            #expect(read?.maxRate == 8_000_000 && read?.maxRateTimetable == "09:00-17:00 1M")
            if owned {
                #expect(read?.owner == OwnerIdentity.current && read?.ownerIsLive == true && (read?.leaseUntil ?? 0) > 0)
            } else {
                #expect(read?.requestedControl == .pause && read?.runNow == true && read?.owner == nil)
            }
        }
        expectEveryField(try t.store.run(run.id), false)
        expectEveryField(try t.store.listRuns(RunFilter()).first, false)
        expectEveryField(try t.store.runDetail(run.id)?.run, false)
        #expect(try t.store.claimRun(run.id, owner: .current, lease: 60))
        expectEveryField(try t.store.run(run.id), true)
        expectEveryField(try t.store.listRuns(RunFilter(queues: ["uploads"])).first, true)
    }

    /// An event read with its data as journaled text is written out (`jsonBytes`, what the event
    /// streams send) exactly as the parsed event is (`json.jsonText`, what `events --json`
    /// prints): hostile strings, no run, no step, no data, nested data, whole and fractional times.
    @Test(arguments: StoreKind.allCases)
    func storedEventsWriteTheSameJSONAsParsedOnes(_ kind: StoreKind) throws {
        let t = try StoreUnderTest(kind)
        try t.makeRun()
        try t.store.appendEvents([
            EventRecord(runID: "r1", time: 1795519605.1051953, type: .stepSucceeded, step: "s\"2</script>",
                        data: ["attempt": 1, "duration_ms": 0, "error": "quote \" back\\slash \n\t\u{01} é 😀"]),
            EventRecord(runID: nil, time: 7, type: .queuePreempted),
            EventRecord(runID: "r1", time: 8.5, type: .stepProgress, step: "up",
                        data: ["files": ["a.mov", "b c.mov"], "rate": 1.5e-9, "nested": ["deep": ["x": .null, "y": false]]]),
            EventRecord(runID: "r1", time: -0.25, type: .runFinished, data: [:]),
        ])
        let stored = try t.store.storedEvents(runID: nil, afterSeq: 0, limit: 100)
        let parsed = try t.store.events(runID: nil, afterSeq: 0, limit: 100)
        #expect(stored.count == 5)
        #expect(stored.map { String(decoding: $0.jsonBytes, as: UTF8.self) } == parsed.map(\.json.jsonText))
        #expect(stored.map { $0.record.json.jsonText } == parsed.map(\.json.jsonText))
        #expect(String(decoding: try #require(stored.last).jsonBytes, as: UTF8.self).hasPrefix("{\"run\":"))  // empty data left out
    }

    /// A fan-out's round: more steps and events than one multi-row statement takes (SQLite writes
    /// 16 rows a statement), a step written twice across statements, events in the order given.
    @Test(arguments: StoreKind.allCases)
    func aLargeBatchIsWrittenInOrder(_ kind: StoreKind) throws {
        let t = try StoreUnderTest(kind)
        try t.makeRun()
        var batch = JournalBatch()
        for index in 0 ..< 40 {
            var item = StepRecord(runID: "r1", id: "wide[\(index)]", step: "wide", kind: .item, status: .pending)
            item.itemIndex = index
            item.item = .int(Int64(index))
            batch.stepUpserts.append(item)
            batch.events.append(EventRecord(runID: "r1", time: Double(index), type: .stepStarted, step: item.id,
                                            data: ["index": .int(Int64(index))]))
        }
        var again = batch.stepUpserts[3]
        again.status = .succeeded
        again.outputs = ["done": true]
        batch.stepUpserts.append(again)  // in a later statement than the first write of wide[3]
        try t.store.commit(batch)
        let steps = Dictionary(uniqueKeysWithValues: try t.store.steps(ofRun: "r1").map { ($0.id, $0) })
        #expect(steps.count == 40)
        #expect(steps["wide[39]"]?.item == 39 && steps["wide[39]"]?.itemIndex == 39)
        #expect(steps["wide[3]"]?.status == .succeeded && steps["wide[3]"]?.outputs == ["done": true])
        #expect(steps["wide[4]"]?.status == .pending)
        let events = try t.store.events(runID: "r1", afterSeq: 0, limit: 100).filter { $0.type == .stepStarted }
        #expect(events.map { $0.data["index"] } == (0 ..< 40).map { .int(Int64($0)) })
        #expect(zip(events, events.dropFirst()).allSatisfy { $0.seq < $1.seq })
    }

    /// A fan-out's items have rows only once started; the fan-out's row lists them all. Both
    /// readers of steps list every item of the list, the unstarted ones as pending with their
    /// index and element; an item's own row wins over the list.
    @Test(arguments: StoreKind.allCases)
    func aFanOutsUnstartedItemsAreListedAsPending(_ kind: StoreKind) throws {
        let t = try StoreUnderTest(kind)
        try t.makeRun()
        var batch = JournalBatch()
        var fanOut = StepRecord(runID: "r1", id: "wide", step: "wide", kind: .fanOut, status: .running)
        fanOut.item = ["a", "b", "c", "d"]
        var started = StepRecord(runID: "r1", id: "wide[1]", step: "wide", kind: .item, status: .running)
        started.itemIndex = 1
        started.item = "b"
        started.attempt = 1
        var other = StepRecord(runID: "r1", id: "other", step: "other", kind: .fanOut, status: .succeeded)
        other.item = ["x"]
        var otherItem = StepRecord(runID: "r1", id: "other[0]", step: "other", kind: .item, status: .succeeded)
        otherItem.itemIndex = 0
        otherItem.item = "x"
        batch.stepUpserts = [fanOut, started, other, otherItem]
        try t.store.commit(batch)

        for steps in [try t.store.steps(ofRun: "r1"), try #require(try t.store.runDetail("r1")).steps] {
            #expect(steps.count == 7, "\(steps.map(\.id))")
            let byID = Dictionary(uniqueKeysWithValues: steps.map { ($0.id, $0) })
            #expect(byID["wide[1]"]?.status == .running && byID["wide[1]"]?.attempt == 1)
            for (index, element) in [(0, "a"), (2, "c"), (3, "d")] {
                let item = try #require(byID["wide[\(index)]"])
                #expect(item.kind == .item && item.status == .pending && item.step == "wide" && item.runID == "r1")
                #expect(item.itemIndex == index && item.item == .string(element) && item.attempt == 0)
            }
            #expect(byID["other[0]"]?.status == .succeeded)
        }
    }

    /// Text that array literals and quoting could mangle: quotes, backslashes, braces, commas,
    /// the word NULL, newlines and non-ASCII, beside real NULLs, in one multi-row commit.
    @Test(arguments: StoreKind.allCases)
    func journaledTextSurvivesQuotesBackslashesAndNulls(_ kind: StoreKind) throws {
        let t = try StoreUnderTest(kind)
        try t.makeRun()
        let hostile = #"say "hi" \ {a,b} NULL, 'x' \#n é ✓ \"#
        var run = try #require(try t.store.run("r1"))
        run.error = hostile
        run.outputs = ["text": .string(hostile)]
        run.labels = ["label": hostile]
        var batch = JournalBatch()
        batch.runUpdates = [run]
        var failed = StepRecord(runID: "r1", id: "a\"b", step: "a", kind: .step, status: .failed)
        failed.errorMessage = hostile
        failed.item = ["file": .string(hostile)]
        let plain = StepRecord(runID: "r1", id: "NULL", step: "b", kind: .step, status: .pending)
        batch.stepUpserts = [failed, plain]
        batch.events = [
            EventRecord(runID: "r1", time: 2.5, type: .stepFailed, step: hostile, data: ["error": .string(hostile)]),
            EventRecord(runID: "r1", time: 3, type: .runFinished, step: nil, data: [:]),
        ]
        try t.store.commit(batch)
        let read = try #require(try t.store.run("r1"))
        #expect(read.error == hostile && read.outputs == ["text": .string(hostile)] && read.labels == ["label": hostile])
        let steps = Dictionary(uniqueKeysWithValues: try t.store.steps(ofRun: "r1").map { ($0.id, $0) })
        #expect(steps["a\"b"]?.errorMessage == hostile && steps["a\"b"]?.item == ["file": .string(hostile)])
        #expect(steps["NULL"]?.errorMessage == nil && steps["NULL"]?.status == .pending)
        let events = try t.store.events(runID: "r1", afterSeq: 0, limit: 10)
        #expect(events.map(\.type) == [.runAdded, .stepFailed, .runFinished])
        #expect(events[1].step == hostile && events[1].data == ["error": .string(hostile)] && events[1].time == 2.5)
        #expect(events[2].step == nil)
    }

    /// Every field of a step and of an event reads back as written: empty text stays empty
    /// (not NULL), numbers keep their fractions, a later upsert clears what it sets to nil.
    @Test(arguments: StoreKind.allCases)
    func everyStepFieldRoundTrips(_ kind: StoreKind) throws {
        let t = try StoreUnderTest(kind)
        try t.makeRun()
        var step = StepRecord(runID: "r1", id: "put[3]", step: "put", kind: .item, status: .waitingRetry)
        step.itemIndex = 3
        step.item = ["file": "é ✓.mov", "size": 42]
        step.attempt = 2
        step.failures = 1
        step.nextAttemptAt = 1_700_000_000.25
        step.idempotencyKey = ""
        step.outputs = [:]
        step.errorKind = "retryable"
        step.errorCode = ""
        step.errorMessage = "503 🎬"
        step.startedAt = 1.5
        step.finishedAt = 2.75
        step.completionSeq = 7
        step.node = "bay-1"
        var batch = JournalBatch()
        batch.stepUpserts = [step]
        batch.events = [EventRecord(runID: "r1", time: 2.125, type: .stepRetrying, step: "", data: ["reason": ""])]
        try t.store.commit(batch)
        let read = try #require(try t.store.steps(ofRun: "r1").first)
        #expect(read.id == "put[3]" && read.step == "put" && read.kind == .item && read.status == .waitingRetry)
        #expect(read.itemIndex == 3 && read.item == ["file": "é ✓.mov", "size": 42])
        #expect(read.attempt == 2 && read.failures == 1 && read.nextAttemptAt == 1_700_000_000.25)
        #expect(read.idempotencyKey == "" && read.outputs == [:])
        #expect(read.errorKind == "retryable" && read.errorCode == "" && read.errorMessage == "503 🎬")
        #expect(read.startedAt == 1.5 && read.finishedAt == 2.75 && read.completionSeq == 7 && read.node == "bay-1")
        let event = try #require(try t.store.events(runID: "r1", afterSeq: 0, limit: 10).last)
        #expect(event.step == "" && event.time == 2.125 && event.data == ["reason": ""])

        var succeeded = step
        succeeded.status = .succeeded
        succeeded.nextAttemptAt = nil
        succeeded.errorKind = nil
        succeeded.errorCode = nil
        succeeded.errorMessage = nil
        batch = JournalBatch()
        batch.stepUpserts = [succeeded]
        try t.store.commit(batch)
        let after = try #require(try t.store.steps(ofRun: "r1").first)
        #expect(after.status == .succeeded && after.nextAttemptAt == nil)
        #expect(after.errorKind == nil && after.errorCode == nil && after.errorMessage == nil && after.completionSeq == 7)
    }

    @Test(arguments: StoreKind.allCases)
    func aLiveOwnerKeepsItsRunAndADeadOneLosesIt(_ kind: StoreKind) throws {
        let t = try StoreUnderTest(kind)
        try t.makeRun()
        // A dead owner with an unexpired lease: taken over at once (same node, pid gone).
        let dead = try deadOwner()
        #expect(try t.store.claimRun("r1", owner: dead, lease: 60))
        #expect(try t.store.run("r1")?.ownerIsLive == false)
        #expect(try t.store.claimRun("r1", owner: .current, lease: 60))
        #expect(try t.store.run("r1")?.ownerIsLive == true)
        // Now this live process owns it: someone else on this node cannot take it.
        let other = OwnerIdentity(node: NodeName.current, pid: getppid(), startTime: 0)
        #expect(try t.store.claimRun("r1", owner: other, lease: 60) == false)
        #expect(try t.store.renewLease("r1", owner: .current, lease: 60).owned)
        #expect(try t.store.renewLease("r1", owner: other, lease: 60).owned == false)
        try t.store.requestControl("r1", control: .cancel)
        #expect(try t.store.renewLease("r1", owner: .current, lease: 60).control == .cancel)
        #expect(try t.store.takeControls(owner: .current).map(\.control) == [.cancel])
        #expect(try t.store.takeControls(owner: .current).isEmpty)
        try t.store.releaseRun("r1", owner: .current)
        #expect(try t.store.run("r1")?.owner == nil)
    }

    @Test(arguments: StoreKind.allCases)
    func anOwnerOnAnotherNodeIsJudgedByItsLease(_ kind: StoreKind) throws {
        let t = try StoreUnderTest(kind)
        try t.makeRun()
        let remote = OwnerIdentity(node: "elsewhere", pid: 1, startTime: 1)
        #expect(try t.store.claimRun("r1", owner: remote, lease: 60))
        #expect(try t.store.run("r1")?.ownerIsLive == true)
        #expect(try t.store.claimRun("r1", owner: .current, lease: 60) == false)
        #expect(try t.store.claimRun("r1", owner: remote, lease: -1))
        #expect(try t.store.run("r1")?.ownerIsLive == false)
        #expect(try t.store.claimRun("r1", owner: .current, lease: 60))
    }

    @Test(arguments: StoreKind.allCases)
    func aFencedCommitOfANonOwnerWritesNothing(_ kind: StoreKind) throws {
        let t = try StoreUnderTest(kind)
        try t.makeRun()
        let remote = OwnerIdentity(node: "elsewhere", pid: 1, startTime: 1)
        #expect(try t.store.claimRun("r1", owner: remote, lease: 60))
        var batch = JournalBatch()
        batch.fence = ("r1", .current)
        batch.stepUpserts = [StepRecord(runID: "r1", id: "a", step: "a", kind: .step, status: .succeeded)]
        batch.events = [EventRecord(runID: "r1", time: 2, type: .stepSucceeded, step: "a")]
        #expect(throws: StoreError.self) { try t.store.commit(batch) }
        #expect(try t.store.steps(ofRun: "r1").isEmpty)
        #expect(try t.store.events(runID: "r1", afterSeq: 0, limit: 10).map(\.type) == [.runAdded])
        batch.fence = ("r1", remote)
        try t.store.commit(batch)
        #expect(try t.store.steps(ofRun: "r1").count == 1)
    }

    @Test(arguments: StoreKind.allCases)
    func checkpointsAndItemsOfANonOwnerAreRefused(_ kind: StoreKind) throws {
        let t = try StoreUnderTest(kind)
        try t.makeRun()
        try t.store.addItem(runID: "r1", stepID: "s", id: "i", json: "{}", event: nil)
        let remote = OwnerIdentity(node: "elsewhere", pid: 1, startTime: 1)
        #expect(try t.store.claimRun("r1", owner: remote, lease: 60))
        try t.store.saveCheckpoint(runID: "r1", stepID: "s", data: [1], fence: remote)
        #expect(throws: StoreError.self) { try t.store.saveCheckpoint(runID: "r1", stepID: "s", data: [2], fence: .current) }
        #expect(throws: StoreError.self) { try t.store.saveItemCheckpoint(runID: "r1", stepID: "s", id: "i", data: [2], fence: .current) }
        #expect(throws: StoreError.self) {
            try t.store.finishItem(runID: "r1", stepID: "s", id: "i", error: nil, event: nil, fence: .current)
        }
        #expect(try t.store.checkpoint(runID: "r1", stepID: "s") == [1])
        #expect(try t.store.items(runID: "r1", stepID: "s").map(\.status) == [.queued])
    }

    @Test(arguments: StoreKind.allCases)
    func concurrencyLeasesHoldAcrossProcessesAndFreeDeadOwners(_ kind: StoreKind) throws {
        let t = try StoreUnderTest(kind)
        let a = t.store, b = try t.reopen()
        let key = [(key: "api:x", limit: 2)]
        #expect(try a.tryAcquireLeases(key, holder: "r1/a", owner: .current, lease: 60))
        #expect(try b.tryAcquireLeases(key, holder: "r2/a", owner: .current, lease: 60))
        #expect(try b.tryAcquireLeases(key, holder: "r2/b", owner: .current, lease: 60) == false)
        // Several keys are all-or-nothing.
        #expect(try a.tryAcquireLeases([(key: "other", limit: 5), (key: "api:x", limit: 2)], holder: "r1/c",
                                       owner: .current, lease: 60) == false)
        #expect(try a.tryAcquireLeases([(key: "other", limit: 1)], holder: "r1/d", owner: .current, lease: 60))
        var release = JournalBatch()
        release.releasedLeases = ["r1/a"]
        try a.commit(release)
        #expect(try b.tryAcquireLeases(key, holder: "r2/b", owner: .current, lease: 60))
        // A slot held by a dead process of this node is not counted.
        let dead = try deadOwner()
        #expect(try a.tryAcquireLeases([(key: "solo", limit: 1)], holder: "dead/x", owner: dead, lease: 60))
        #expect(try b.tryAcquireLeases([(key: "solo", limit: 1)], holder: "r2/c", owner: .current, lease: 60))
        // An expired slot of another node is not counted either; a live one is.
        let remote = OwnerIdentity(node: "elsewhere", pid: 1, startTime: 1)
        #expect(try a.tryAcquireLeases([(key: "exp", limit: 1)], holder: "r9/e", owner: remote, lease: -1))
        #expect(try b.tryAcquireLeases([(key: "exp", limit: 1)], holder: "r2/e", owner: .current, lease: 60))
        #expect(try a.tryAcquireLeases([(key: "far", limit: 1)], holder: "r9/f", owner: remote, lease: 60))
        #expect(try b.tryAcquireLeases([(key: "far", limit: 1)], holder: "r2/f", owner: .current, lease: 60) == false)
    }

    @Test(arguments: StoreKind.allCases)
    func itemsAreQueuedInOrderAndFinishedOnce(_ kind: StoreKind) throws {
        let t = try StoreUnderTest(kind)
        try t.makeRun()
        try t.store.addItem(runID: "r1", stepID: "accept", id: "i1", json: #"{"source":"/a"}"#,
                            event: EventRecord(runID: "r1", time: 2, type: .itemAdded, step: "accept", data: ["item": "i1"]))
        try t.store.addItem(runID: "r1", stepID: "accept", id: "i2", json: #"{"source":"/b"}"#, event: nil)
        #expect(throws: (any Error).self) { try t.store.addItem(runID: "r1", stepID: "accept", id: "i1", json: "{}", event: nil) }
        #expect(try t.store.nextQueuedItem(runID: "r1", stepID: "accept", after: 0)?.id == "i1")
        #expect(try t.store.nextQueuedItem(runID: "r1", stepID: "accept", after: 1)?.id == "i2")
        try t.store.finishItem(runID: "r1", stepID: "accept", id: "i1", error: nil,
                               event: EventRecord(runID: "r1", time: 3, type: .itemFinished, step: "accept", data: ["item": "i1"]), fence: nil)
        try t.store.finishItem(runID: "r1", stepID: "accept", id: "i2", error: "permission denied", event: nil, fence: nil)
        let types = try t.store.events(runID: "r1", afterSeq: 0, limit: 10).map(\.type)
        #expect(types == [.runAdded, .itemAdded, .itemFinished])
        try t.store.saveItemCheckpoint(runID: "r1", stepID: "accept", id: "i2", data: [1, 2, 3], fence: nil)
        let items = try t.store.items(runID: "r1", stepID: "accept")
        #expect(items.map(\.id) == ["i1", "i2"])
        #expect(items.map(\.seq) == [1, 2])
        #expect(items.map(\.status) == [.done, .failed])
        #expect(items[1].error == "permission denied")
        #expect(items[1].checkpoint == [1, 2, 3])
        #expect(try t.store.nextQueuedItem(runID: "r1", stepID: "accept", after: 0) == nil)
        // Every item of the run in one read: by step, then in the order added.
        try t.store.addItem(runID: "r1", stepID: "a-first", id: "i3", json: "{}", event: nil)
        #expect(try t.store.items(runID: "r1").map { "\($0.stepID)/\($0.id)" } == ["a-first/i3", "accept/i1", "accept/i2"])
        #expect(try t.store.items(runID: "other").isEmpty)
    }

    /// A batch of items is one transaction: numbered in order after the step's items, with
    /// their events; a batch with one bad item (an id already taken) adds none of them, and no
    /// event.
    @Test(arguments: StoreKind.allCases)
    func aBatchOfItemsIsAddedWhole(_ kind: StoreKind) throws {
        let t = try StoreUnderTest(kind)
        try t.makeRun()
        func item(_ id: String) -> NewItem {
            NewItem(id: id, json: #"{"source":"/\#(id)"}"#,
                    event: EventRecord(runID: "r1", time: 2, type: .itemAdded, step: "accept", data: ["item": .string(id)]))
        }
        try t.store.addItem(runID: "r1", stepID: "accept", id: "i0", json: "{}", event: nil)
        try t.store.addItems(runID: "r1", stepID: "accept", ["i1", "i2", "i3"].map(item))
        #expect(throws: (any Error).self) { try t.store.addItems(runID: "r1", stepID: "accept", ["i4", "i2"].map(item)) }
        try t.store.addItems(runID: "r1", stepID: "accept", [])
        let items = try t.store.items(runID: "r1", stepID: "accept")
        #expect(items.map(\.id) == ["i0", "i1", "i2", "i3"])
        #expect(items.map(\.seq) == [1, 2, 3, 4])
        #expect(items[2].json == #"{"source":"/i2"}"#)
        let added = try t.store.events(runID: "r1", afterSeq: 0, limit: 10).filter { $0.type == .itemAdded }
        #expect(added.map { $0.data["item"]?.stringValue ?? "" } == ["i1", "i2", "i3"])
        #expect(try t.store.nextQueuedItem(runID: "r1", stepID: "accept", after: 1)?.id == "i1")
    }

    /// A run's detail carries a window of its items (by step, then as added) with every
    /// step's counts by state and the cursor of the next page: a session of 100,000 items is
    /// read a page at a time.
    @Test(arguments: StoreKind.allCases)
    func runDetailPagesItemsWithCountsAndACursor(_ kind: StoreKind) throws {
        let t = try StoreUnderTest(kind)
        try t.makeRun()
        try t.makeRun("r2")
        for (step, id) in [("b", "b1"), ("a", "a1"), ("b", "b2"), ("a", "a2"), ("b", "b3")] {
            try t.store.addItem(runID: "r1", stepID: step, id: id, json: "{}", event: nil)
        }
        try t.store.addItem(runID: "r2", stepID: "a", id: "x", json: "{}", event: nil)
        try t.store.finishItem(runID: "r1", stepID: "b", id: "b1", error: nil, event: nil, fence: nil)
        try t.store.finishItem(runID: "r1", stepID: "a", id: "a2", error: "gone", event: nil, fence: nil)

        var window = ItemWindow(limit: 2)
        var seen: [String] = [], pages = 0
        while pages < 5 {
            let detail = try #require(try t.store.runDetail("r1", items: window))
            #expect(detail.items.count <= 2)
            seen += detail.items.map { "\($0.stepID)/\($0.id)" }
            pages += 1
            guard let next = detail.itemsNext else { break }
            #expect(ItemCursor(text: next.text) == next)
            window.after = next
        }
        #expect(seen == ["a/a1", "a/a2", "b/b1", "b/b2", "b/b3"])
        #expect(pages == 3)
        let last = try #require(try t.store.runDetail("r1", items: ItemWindow(limit: 2, last: true)))
        #expect(last.items.map(\.id) == ["b2", "b3"] && last.itemsNext == nil)
        let counts = Set(last.itemCounts.map { "\($0.stepID) \($0.status.rawValue) \($0.count)" })
        #expect(counts == ["a queued 1", "a failed 1", "b done 1", "b queued 2"])
        let none = try #require(try t.store.runDetail("r1", items: ItemWindow(limit: 0)))
        #expect(none.items.isEmpty && none.itemCounts.count == 4)
    }

    /// `runDetail` is `run`, `steps(ofRun:)`, `items(runID:)` and `latestProgress` in one read:
    /// the same records, of that run only; nil for a run that does not exist.
    @Test(arguments: StoreKind.allCases)
    func runDetailHoldsTheRunItsStepsItemsAndLatestProgress(_ kind: StoreKind) throws {
        let t = try StoreUnderTest(kind)
        try t.makeRun()
        try t.makeRun("r2")
        var batch = JournalBatch()
        var upload = StepRecord(runID: "r1", id: "upload", step: "upload", kind: .step, status: .running)
        upload.attempt = 2
        upload.startedAt = 5
        batch.stepUpserts = [upload, StepRecord(runID: "r1", id: "notify", step: "notify", kind: .step, status: .pending),
                             StepRecord(runID: "r2", id: "elsewhere", step: "elsewhere", kind: .step, status: .pending)]
        batch.events = [
            EventRecord(runID: "r1", time: 3, type: .stepProgress, step: "upload", data: ["bytes_done": 1]),
            EventRecord(runID: "r1", time: 4, type: .stepProgress, step: "upload", data: ["bytes_done": 7]),
            EventRecord(runID: "r2", time: 4, type: .stepProgress, step: "elsewhere", data: ["bytes_done": 3]),
        ]
        try t.store.commit(batch)
        try t.store.addItem(runID: "r1", stepID: "accept", id: "i2", json: #"{"source":"/b"}"#, event: nil)
        try t.store.addItem(runID: "r1", stepID: "a-first", id: "i1", json: "{}", event: nil)
        try t.store.addItem(runID: "r2", stepID: "accept", id: "i9", json: "{}", event: nil)

        let detail = try #require(try t.store.runDetail("r1"))
        #expect(detail.run.id == "r1" && detail.run.labels == ["team": "media"] && detail.run.inputs == ["a": 1])
        #expect(detail.steps.map(\.id).sorted() == ["notify", "upload"])
        let readAlone = try #require(try t.store.steps(ofRun: "r1").first { $0.id == "upload" })
        let readTogether = try #require(detail.steps.first { $0.id == "upload" })
        #expect(readTogether.attempt == readAlone.attempt && readTogether.startedAt == 5 && readTogether.status == .running)
        #expect(detail.items.map { "\($0.stepID)/\($0.id)" } == ["a-first/i1", "accept/i2"])
        #expect(detail.items.map(\.json) == (try t.store.items(runID: "r1")).map(\.json))
        #expect(detail.progress.map { $0.data["bytes_done"] } == [7])
        #expect(detail.progress.map(\.seq) == (try t.store.latestProgress(runID: "r1")).map(\.seq))
        #expect(try t.store.runDetail("nope") == nil)
        // A run with nothing but its record.
        try t.makeRun("bare")
        let bare = try #require(try t.store.runDetail("bare"))
        #expect(bare.steps.isEmpty && bare.items.isEmpty && bare.progress.isEmpty)
    }

    @Test(arguments: StoreKind.allCases)
    func claimsFollowQueuesPriorityAndRunNow(_ kind: StoreKind) throws {
        let t = try StoreUnderTest(kind)
        try t.makeRun("old", status: .queued, createdAt: 1)
        try t.makeRun("urgent", status: .queued, priority: 5, createdAt: 2)
        try t.makeRun("elsewhere", queue: "exports", status: .queued, createdAt: 0)
        try t.makeRun("later", status: .queued, createdAt: 3)
        try t.store.updateQueueFields("later", status: nil, queueOrder: -1, runNow: true)
        try t.makeRun("paused", status: .paused, createdAt: 4)
        var asked = RunFilter(statuses: [.queued])
        asked.runNowOnly = true
        #expect(try t.store.listRuns(asked).map(\.id) == ["later"])
        let first = try t.store.claimNextRuns(owner: .current, queues: ["default"], limit: 2, lease: 60)
        #expect(first.map(\.id) == ["later", "urgent"])
        #expect(first.allSatisfy { $0.owner == .current && $0.runNow == false })
        #expect(try t.store.claimNextRuns(owner: .current, queues: ["default"], limit: 5, lease: 60).map(\.id) == ["old"])
        #expect(try t.store.claimNextRuns(owner: .current, queues: ["default"], limit: 5, lease: 60).isEmpty)
        #expect(try t.store.claimPausedRuns(owner: .current, queues: ["default"], lease: 60).map(\.id) == ["paused"])
        #expect(try t.store.claimNextRuns(owner: .current, queues: ["exports", "default"], limit: 5, lease: 60).map(\.id)
                == ["elsewhere"])
        // A run left by an owner on another node whose lease ran out is taken first (a store
        // may look for such runs only once a second: wait for the next look).
        let remote = OwnerIdentity(node: "gone", pid: 7, startTime: 7)
        try t.makeRun("orphan", status: .running, createdAt: 9)
        #expect(try t.store.claimRun("orphan", owner: remote, lease: -1))
        try t.makeRun("fresh", status: .queued, createdAt: 10)
        Thread.sleep(forTimeInterval: 1.1)
        let taken = try t.store.claimNextRuns(owner: .current, queues: ["default"], limit: 1, lease: 60)
        #expect(taken.map(\.id) == ["orphan"])
        #expect(taken.first?.takenFrom == remote)
        // A queued run claimed by an owner whose lease ran out before it started is the queue's
        // again, in its place (behind "fresh", ahead of "behind-it").
        let stalled = OwnerIdentity(node: "stalled", pid: 8, startTime: 8)
        try t.makeRun("abandoned", status: .queued, createdAt: 11)
        try t.makeRun("behind-it", status: .queued, createdAt: 12)
        #expect(try t.store.claimRun("abandoned", owner: stalled, lease: -1))
        Thread.sleep(forTimeInterval: 1.1)
        let next = try t.store.claimNextRuns(owner: .current, queues: ["default"], limit: 2, lease: 60)
        #expect(next.map(\.id) == ["fresh", "abandoned"])
        #expect(next.map(\.takenFrom) == [nil, stalled])
        #expect(try t.store.claimNextRuns(owner: .current, queues: ["default"], limit: 5, lease: 60).map(\.id) == ["behind-it"])
    }

    @Test(arguments: StoreKind.allCases)
    func concurrentWorkersNeverClaimTheSameRun(_ kind: StoreKind) throws {
        let t = try StoreUnderTest(kind)
        for i in 0..<120 { try t.makeRun(String(format: "r%03d", i), status: .queued, createdAt: Double(i)) }
        // Four workers, each its own store object (connection) and identity (on other nodes).
        let stores = try (0..<4).map { _ in try t.reopen() }
        let claimed = Collected<String>()
        DispatchQueue.concurrentPerform(iterations: 4) { worker in
            let owner = OwnerIdentity(node: "worker-\(worker)", pid: Int32(100 + worker), startTime: 1)
            while true {
                guard let runs = try? stores[worker].claimNextRuns(owner: owner, queues: ["default"], limit: 3, lease: 60),
                      !runs.isEmpty
                else { break }
                for run in runs { claimed.add(run.id) }
            }
        }
        #expect(claimed.all.count == 120)
        #expect(Set(claimed.all).count == 120)
    }

    /// Many run threads of one process commit at once (a worker with 32 runs; the PostgreSQL
    /// store folds such commits into shared transactions): each batch still succeeds or fails
    /// on its own fence, and what succeeded is all there, in each run's order.
    @Test(arguments: StoreKind.allCases)
    func concurrentCommitsSucceedOrFailEachOnItsOwnFence(_ kind: StoreKind) throws {
        let t = try StoreUnderTest(kind)
        let owner = OwnerIdentity(node: "worker", pid: 1, startTime: 1)
        let stranger = OwnerIdentity(node: "stranger", pid: 2, startTime: 2)
        let ids = (0..<24).map { String(format: "r%02d", $0) }
        for id in ids {
            try t.makeRun(id)
            #expect(try t.store.claimRun(id, owner: id == "r07" ? stranger : owner, lease: 60))
        }
        let refused = Collected<String>()
        DispatchQueue.concurrentPerform(iterations: ids.count) { i in
            let id = ids[i]
            for round in 1...5 {
                var batch = JournalBatch()
                batch.fence = (id, owner)
                var run = RunRecord(id: id, workflowName: "wf", workflowFile: "/wf.yaml", workflowSource: "name: wf",
                                    inputs: [:], status: round == 5 ? .succeeded : .running, createdAt: 1,
                                    runDir: RunRecord.runDirectory(for: id))
                run.startedAt = 10
                batch.runUpdates = [run]
                batch.stepUpserts = [StepRecord(runID: id, id: "s\(round)", step: "s", kind: .step, status: .succeeded)]
                if round == 3 { batch.deletedSteps = [(id, "s1")] }  // commits alone; must not disturb the others
                batch.releasesRun = round == 5  // the last commit gives the run up with it
                batch.events = [EventRecord(runID: id, time: Double(round), type: .stepSucceeded, step: "s\(round)")]
                do { try t.store.commit(batch) } catch { refused.add("\(id)/\(round)") }
            }
        }
        #expect(Set(refused.all) == Set((1...5).map { "r07/\($0)" }))
        for id in ids {
            let events = try t.store.events(runID: id, afterSeq: 0, limit: 100)
            let steps = try t.store.steps(ofRun: id).map(\.id).sorted()
            if id == "r07" {
                #expect(steps.isEmpty)
                #expect(events.map(\.type) == [.runAdded])
                #expect(try t.store.run(id)?.status == .running)
                #expect(try t.store.run(id)?.owner == stranger, "a fenced-out release must not free the run")
            } else {
                #expect(steps == ["s2", "s3", "s4", "s5"], "\(id)")
                #expect(events.compactMap(\.step) == ["s1", "s2", "s3", "s4", "s5"], "\(id)")
                #expect(try t.store.run(id)?.status == .succeeded)
                #expect(try t.store.run(id)?.startedAt == 10)
                #expect(try t.store.run(id)?.owner == nil, "released by its last commit")
            }
        }
    }

    @Test(arguments: StoreKind.allCases)
    func aFollowerOfEventsMissesNothingWhileManyWrite(_ kind: StoreKind) throws {
        let t = try StoreUnderTest(kind)
        try t.makeRun()
        let writers = try (0..<4).map { _ in try t.reopen() }
        let done = Collected<Bool>()
        var seen: [Int64] = []
        var cursor: Int64 = 0
        DispatchQueue.global().async {
            DispatchQueue.concurrentPerform(iterations: 4) { w in
                for i in 0..<50 {
                    try? writers[w].appendEvents([
                        EventRecord(runID: "r1", time: 1, type: .stepLog, data: ["w": .int(Int64(w)), "i": .int(Int64(i))]),
                        EventRecord(runID: "r1", time: 1, type: .stepLog, data: ["w": .int(Int64(w)), "i": .int(Int64(i)), "second": true]),
                    ])
                }
            }
            done.add(true)
        }
        // Follow while they write, as `events --follow` and the API's SSE do.
        while true {
            let finished = !done.all.isEmpty
            let batch = try t.store.events(runID: "r1", afterSeq: cursor, limit: 37)
            for event in batch { seen.append(event.seq) }
            cursor = batch.last?.seq ?? cursor
            if finished && batch.isEmpty { break }
        }
        let all = try t.store.events(runID: "r1", afterSeq: 0, limit: 10_000).map(\.seq)
        #expect(all.count == 401)
        #expect(seen == all, "the follower saw \(seen.count) of \(all.count)")
    }

    @Test(arguments: StoreKind.allCases)
    func deletingARunRemovesEverythingAboutIt(_ kind: StoreKind) throws {
        let t = try StoreUnderTest(kind)
        try t.makeRun()
        try t.makeRun("keep")
        var batch = JournalBatch()
        batch.stepUpserts = [StepRecord(runID: "r1", id: "a", step: "a", kind: .step)]
        try t.store.commit(batch)
        try t.store.saveCheckpoint(runID: "r1", stepID: "a", data: [1], fence: nil)
        try t.store.addItem(runID: "r1", stepID: "a", id: "i", json: "{}", event: nil)
        #expect(try t.store.tryAcquireLeases([(key: "k", limit: 1)], holder: "r1/a", owner: .current, lease: 60))
        try t.store.deleteRun("r1")
        #expect(try t.store.run("r1") == nil)
        #expect(try t.store.steps(ofRun: "r1").isEmpty)
        #expect(try t.store.checkpoint(runID: "r1", stepID: "a") == nil)
        #expect(try t.store.items(runID: "r1", stepID: "a").isEmpty)
        #expect(try t.store.events(runID: "r1", afterSeq: 0, limit: 10).isEmpty)
        #expect(try t.store.tryAcquireLeases([(key: "k", limit: 1)], holder: "keep/a", owner: .current, lease: 60))
        #expect(try t.store.run("keep") != nil)
    }

    /// A follower resumes by seq: deleting the run that holds the newest events must not let a
    /// later event take one of their seqs again. The deletion is an event of its own.
    @Test(arguments: StoreKind.allCases)
    func deletingTheNewestRunNeverLetsASeqBeHandedOutAgain(_ kind: StoreKind) throws {
        let t = try StoreUnderTest(kind)
        try t.makeRun("old")
        try t.makeRun("newest")
        try t.store.appendEvents([EventRecord(runID: "newest", time: 2, type: .runFinished)])
        let seen = try #require(try t.store.events(runID: nil, afterSeq: 0, limit: 100).last?.seq)
        try t.store.deleteRun("newest")
        try t.store.appendEvents([EventRecord(runID: "old", time: 3, type: .runFinished)])
        let after = try t.store.events(runID: nil, afterSeq: seen, limit: 100)
        #expect(after.map(\.type) == [.runDeleted, .runFinished])
        #expect(after.first?.runID == nil && after.first?.data == ["run": "newest"])
        #expect(after.allSatisfy { $0.seq > seen })
        #expect(try t.store.events(runID: "old", afterSeq: 0, limit: 100).map(\.type) == [.runAdded, .runFinished])
    }

    @Test(arguments: StoreKind.allCases)
    func thePassiveFlagIsShared(_ kind: StoreKind) throws {
        let t = try StoreUnderTest(kind)
        let other = try t.reopen()
        #expect(try other.isQueuePassive() == false)
        try t.store.setQueuePassive(true)
        #expect(try other.isQueuePassive())
        try t.store.setQueuePassive(false)
        #expect(try other.isQueuePassive() == false)
    }

    /// `queue stop --queue NAME`: named queues made passive one by one, seen by every process,
    /// apart from the store-wide switch, and a name's own passivity undone by its start.
    @Test(arguments: StoreKind.allCases)
    func namedQueuesArePassiveOnTheirOwn(_ kind: StoreKind) throws {
        let t = try StoreUnderTest(kind)
        let other = try t.reopen()
        #expect(try other.passiveQueues().isEmpty)
        try t.store.setQueuePassive(true, queue: "uploads")
        try t.store.setQueuePassive(true, queue: "night.batch-2")
        try t.store.setQueuePassive(true, queue: "uploads")  // twice is once
        #expect(try other.passiveQueues() == ["uploads", "night.batch-2"])
        #expect(try other.isQueuePassive() == false, "a named queue is not the whole store")
        try t.store.setQueuePassive(true)
        try t.store.setQueuePassive(false)
        #expect(try other.passiveQueues() == ["uploads", "night.batch-2"], "the store-wide switch leaves named queues as they were")
        try other.setQueuePassive(false, queue: "uploads")
        try other.setQueuePassive(false, queue: "never-stopped")
        #expect(try t.store.passiveQueues() == ["night.batch-2"])
    }

    /// `orchestrate queue rate`: the cap text every serve reads, and its removal.
    @Test(arguments: StoreKind.allCases)
    func theQueueRateIsSharedAndRemovable(_ kind: StoreKind) throws {
        let t = try StoreUnderTest(kind)
        let other = try t.reopen()
        #expect(try other.queueRate() == nil)
        try t.store.setQueueRate("Mon-Fri 08:00,10M 19:00,off")
        #expect(try other.queueRate() == "Mon-Fri 08:00,10M 19:00,off")
        try t.store.setQueueRate("20M")
        #expect(try other.queueRate() == "20M")
        try t.store.setQueueRate(nil)
        #expect(try other.queueRate() == nil)
    }

    /// A run's `--max-rate` timetable is kept with it, and replaced by `resume --max-rate`.
    @Test(arguments: StoreKind.allCases)
    func aRunKeepsItsRateTimetable(_ kind: StoreKind) throws {
        let t = try StoreUnderTest(kind)
        var run = RunRecord(id: "tt", workflowName: "wf", workflowFile: "/wf.yaml", workflowSource: "name: wf",
                            inputs: [:], status: .queued, createdAt: 1, runDir: RunRecord.runDirectory(for: "tt"))
        run.maxRateTimetable = "08:00,512K 23:00,off"
        try t.store.createRun(run, events: [])
        #expect(try t.store.run("tt")?.maxRateTimetable == "08:00,512K 23:00,off")
        #expect(try t.store.run("tt")?.maxRate == nil)
        run.maxRateTimetable = nil
        run.maxRate = 1 << 20
        var batch = JournalBatch()
        batch.runUpdates = [run]
        try t.store.commit(batch)
        #expect(try t.store.run("tt")?.maxRateTimetable == nil)
        #expect(try t.store.run("tt")?.maxRate == 1 << 20)
    }
}

/// Values gathered from several threads.
final class Collected<T: Sendable>: @unchecked Sendable {
    private let lock = NSLock()
    private var list: [T] = []
    func add(_ value: T) { lock.withLock { list.append(value) } }
    var all: [T] { lock.withLock { list } }
}
