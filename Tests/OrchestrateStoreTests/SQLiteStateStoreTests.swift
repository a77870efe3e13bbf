import Foundation
import OrchestrateJSON
import OrchestrateStore
import OrchestrateTestSupport
import Testing

@Suite struct SQLiteStateStoreTests {
    let dir = TemporaryDirectory("store")

    func makeRun(_ store: SQLiteStateStore, id: String = "r1") throws -> RunRecord {
        let run = RunRecord(id: id, workflowName: "wf", workflowFile: "/wf.yaml", workflowSource: "name: wf",
                            inputs: ["a": 1], status: .running, createdAt: 1, runDir: dir.path, labels: ["team": "media"])
        try store.createRun(run, events: [EventRecord(runID: id, time: 1, type: "run.added")])
        return run
    }

    /// An identity of a process that existed and is now gone.
    func deadOwner() throws -> OwnerIdentity {
        let child = try ChildProcess.run(URL(fileURLWithPath: "/bin/sh"), ["-c", "echo $$"])
        let pid = Int32(child.stdout.trimmingCharacters(in: .whitespacesAndNewlines))!
        return OwnerIdentity(host: OwnerIdentity.current.host, pid: pid, startTime: 12345)
    }

    @Test func createsPrivateFilesInWALMode() throws {
        let stateDir = dir.file("state").path
        let store = try SQLiteStateStore(directory: stateDir)
        _ = try makeRun(store)
        let dirMode = try FileManager.default.attributesOfItem(atPath: stateDir)[.posixPermissions] as! Int
        #expect(dirMode & 0o777 == 0o700)
        for name in ["state.sqlite", "state.sqlite-wal"] {
            let mode = try FileManager.default.attributesOfItem(atPath: stateDir + "/" + name)[.posixPermissions] as! Int
            #expect(mode & 0o777 == 0o600, "\(name) is \(String(mode, radix: 8))")
        }
        let journal = try ChildProcess.run(URL(fileURLWithPath: "/usr/bin/sqlite3"), [store.path, "PRAGMA journal_mode"])
        #expect(journal.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "wal")
        #expect(try store.integrityCheck() == "ok")
    }

    @Test func runsRoundTripAndFilter() throws {
        let store = try SQLiteStateStore(directory: dir.path)
        var run = try makeRun(store)
        _ = try makeRun(store, id: "r2")
        run.status = .succeeded
        run.outputs = ["video": "/videos/1"]
        var batch = JournalBatch()
        batch.runUpdates = [run]
        try store.commit(batch)
        let loaded = try #require(try store.run("r1"))
        #expect(loaded.status == .succeeded)
        #expect(loaded.outputs == ["video": "/videos/1"])
        #expect(loaded.inputs == ["a": 1])
        #expect(loaded.labels == ["team": "media"])
        #expect(try store.listRuns(RunFilter(statuses: [.succeeded])).map(\.id) == ["r1"])
        #expect(try store.listRuns(RunFilter(labels: ["team": "media"])).count == 2)
        #expect(try store.listRuns(RunFilter(labels: ["team": "other"])).isEmpty)
    }

    @Test func stepsCheckpointsAndEventsAreJournaled() throws {
        let store = try SQLiteStateStore(directory: dir.path)
        _ = try makeRun(store)
        var step = StepRecord(runID: "r1", id: "upload", step: "upload", kind: .step, status: .running)
        step.attempt = 2
        step.failures = 1
        step.idempotencyKey = "r1/upload"
        var batch = JournalBatch()
        batch.stepUpserts = [step]
        batch.events = [EventRecord(runID: "r1", time: 2, type: "step.started", step: "upload", data: ["attempt": 2])]
        try store.commit(batch)
        try store.saveCheckpoint(runID: "r1", stepID: "upload", data: Array("offset=42".utf8))
        let steps = try store.steps(ofRun: "r1")
        #expect(steps.count == 1)
        #expect(steps[0].attempt == 2 && steps[0].failures == 1 && steps[0].idempotencyKey == "r1/upload")
        #expect(try store.checkpoint(runID: "r1", stepID: "upload") == Array("offset=42".utf8))
        #expect(try store.checkpoint(runID: "r1", stepID: "other") == nil)
        let events = try store.events(runID: "r1", afterSeq: 0, limit: 10)
        #expect(events.map(\.type) == ["run.added", "step.started"])
        #expect(events[1].data == ["attempt": 2])
        #expect(try store.events(runID: "r1", afterSeq: events[0].seq, limit: 10).count == 1)
    }

    @Test func aLiveOwnerKeepsItsRunAndADeadOneLosesIt() throws {
        let store = try SQLiteStateStore(directory: dir.path)
        _ = try makeRun(store)
        let future = Date().timeIntervalSince1970 + 60
        // A dead owner with an unexpired lease: taken over at once (same host, pid gone).
        let dead = try deadOwner()
        #expect(try store.claimRun("r1", owner: dead, leaseUntil: future))
        #expect(try store.claimRun("r1", owner: .current, leaseUntil: future))
        // Now this live process owns it: someone else on this host cannot take it.
        let other = OwnerIdentity(host: OwnerIdentity.current.host, pid: getppid(), startTime: 0)
        #expect(try store.claimRun("r1", owner: other, leaseUntil: future) == false)
        #expect(try store.renewLease("r1", owner: .current, leaseUntil: future).owned)
        #expect(try store.renewLease("r1", owner: other, leaseUntil: future).owned == false)
        try store.requestControl("r1", control: "cancel")
        #expect(try store.renewLease("r1", owner: .current, leaseUntil: future).control == "cancel")
        try store.releaseRun("r1", owner: .current)
        #expect(try store.run("r1")?.owner == nil)
    }

    @Test func aRemoteOwnerIsJudgedByItsLease() throws {
        let store = try SQLiteStateStore(directory: dir.path)
        _ = try makeRun(store)
        let remote = OwnerIdentity(host: "elsewhere.example", pid: 1, startTime: 1)
        #expect(try store.claimRun("r1", owner: remote, leaseUntil: Date().timeIntervalSince1970 + 60))
        #expect(try store.claimRun("r1", owner: .current, leaseUntil: Date().timeIntervalSince1970 + 60) == false)
        #expect(try store.claimRun("r1", owner: remote, leaseUntil: Date().timeIntervalSince1970 - 1))
        #expect(try store.claimRun("r1", owner: .current, leaseUntil: Date().timeIntervalSince1970 + 60))
    }

    @Test func concurrencyLeasesHoldAcrossConnectionsAndFreeDeadOwners() throws {
        // Two store objects on one directory stand for two processes.
        let a = try SQLiteStateStore(directory: dir.path)
        let b = try SQLiteStateStore(directory: dir.path)
        let until = Date().timeIntervalSince1970 + 60
        let key = [(key: "api:x", limit: 2)]
        #expect(try a.tryAcquireLeases(key, holder: "r1/a", owner: .current, expiresAt: until))
        #expect(try b.tryAcquireLeases(key, holder: "r2/a", owner: .current, expiresAt: until))
        #expect(try b.tryAcquireLeases(key, holder: "r2/b", owner: .current, expiresAt: until) == false)
        // Several keys are all-or-nothing.
        #expect(try a.tryAcquireLeases([(key: "other", limit: 5), (key: "api:x", limit: 2)], holder: "r1/c",
                                       owner: .current, expiresAt: until) == false)
        #expect(try a.tryAcquireLeases([(key: "other", limit: 1)], holder: "r1/d", owner: .current, expiresAt: until))
        var release = JournalBatch()
        release.releasedLeases = ["r1/a"]
        try a.commit(release)
        #expect(try b.tryAcquireLeases(key, holder: "r2/b", owner: .current, expiresAt: until))
        // A slot held by a dead process is not counted.
        let dead = try deadOwner()
        #expect(try a.tryAcquireLeases([(key: "solo", limit: 1)], holder: "dead/x", owner: dead, expiresAt: until))
        #expect(try b.tryAcquireLeases([(key: "solo", limit: 1)], holder: "r2/c", owner: .current, expiresAt: until))
        // An expired lease is not counted either.
        #expect(try a.tryAcquireLeases([(key: "exp", limit: 1)], holder: "r1/e", owner: .current,
                                       expiresAt: Date().timeIntervalSince1970 - 1))
        #expect(try b.tryAcquireLeases([(key: "exp", limit: 1)], holder: "r2/e", owner: .current, expiresAt: until))
    }

    @Test func itemsAreQueuedInOrderAndFinishedOnce() throws {
        let store = try SQLiteStateStore(directory: dir.path)
        _ = try makeRun(store)
        try store.addItem(runID: "r1", stepID: "accept", id: "i1", json: #"{"source":"/a"}"#)
        try store.addItem(runID: "r1", stepID: "accept", id: "i2", json: #"{"source":"/b"}"#)
        #expect(throws: (any Error).self) { try store.addItem(runID: "r1", stepID: "accept", id: "i1", json: "{}") }
        try store.finishItem(runID: "r1", stepID: "accept", id: "i1", error: nil,
                             event: EventRecord(runID: "r1", time: 3, type: "item.finished", step: "accept", data: ["item": "i1"]))
        try store.finishItem(runID: "r1", stepID: "accept", id: "i2", error: "permission denied", event: nil)
        // The event is journaled with the status, in the same transaction.
        #expect(try store.events(runID: "r1", afterSeq: 0, limit: 10).filter { $0.type == "item.finished" }.count == 1)
        try store.saveItemCheckpoint(runID: "r1", stepID: "accept", id: "i2", data: [1, 2, 3])
        let items = try store.items(runID: "r1", stepID: "accept")
        #expect(items.map(\.id) == ["i1", "i2"])
        #expect(items.map(\.status) == [.done, .failed])
        #expect(items[1].error == "permission denied")
        #expect(items[1].checkpoint == [1, 2, 3])
    }

    @Test func manyOpenersOfANewStoreAtOnceAllSucceed() throws {
        // Processes started together on a new state directory must not race to create the schema.
        for round in 0..<10 {
            let directory = dir.file("fresh-\(round)").path
            let failures = Failures()
            DispatchQueue.concurrentPerform(iterations: 4) { _ in
                do { _ = try SQLiteStateStore(directory: directory) } catch { failures.add("\(error)") }
            }
            #expect(failures.all.isEmpty, "\(failures.all)")
        }
    }
}

private final class Failures: @unchecked Sendable {
    private let lock = NSLock()
    private var list: [String] = []
    func add(_ s: String) { lock.withLock { list.append(s) } }
    var all: [String] { lock.withLock { list } }
}
