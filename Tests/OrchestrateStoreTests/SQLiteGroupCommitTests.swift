import Foundation
@testable import OrchestrateStore
import OrchestrateTestSupport
import Testing

/// The SQLite store's group commit (`SQLiteStateStore.writeGroup`): the batches of one group
/// share a transaction, and each succeeds or fails on its own.
@Suite struct SQLiteGroupCommitTests {
    let dir = TemporaryDirectory("group-commit")
    let owner = OwnerIdentity(node: "worker", pid: 1, startTime: 1)

    func store() throws -> SQLiteStateStore {
        let store = try SQLiteStateStore(directory: dir.file("state").path)
        for id in ["r1", "r2", "r3"] {
            try store.createRun(RunRecord(id: id, workflowName: "wf", workflowFile: "/wf.yaml", workflowSource: "",
                                          inputs: [:], status: .running, createdAt: 1, runDir: "runs/\(id)"),
                                events: [EventRecord(runID: id, time: 1, type: .runAdded)])
            #expect(try store.claimRun(id, owner: owner, lease: 60))
        }
        return store
    }

    /// A run's last round: it succeeded, with its step and event, and gives the run up.
    func finishing(_ id: String) -> JournalBatch {
        var batch = JournalBatch()
        batch.fence = (id, owner)
        var run = RunRecord(id: id, workflowName: "wf", workflowFile: "/wf.yaml", workflowSource: "", inputs: [:],
                            status: .succeeded, createdAt: 1, runDir: "runs/\(id)")
        run.finishedAt = 2
        batch.runUpdates = [run]
        batch.stepUpserts = [StepRecord(runID: id, id: "s", step: "s", kind: .step, status: .succeeded)]
        batch.events = [EventRecord(runID: id, time: 2, type: .runFinished)]
        batch.releasesRun = true
        return batch
    }

    /// The middle batch fails half-way (its run's update is written, then a step of a run that
    /// does not exist breaks a foreign key): that batch is rolled back whole, the others commit.
    @Test func aGroupWithAFailingMemberCommitsTheOthers() throws {
        let store = try store()
        var broken = finishing("r2")
        broken.stepUpserts.append(StepRecord(runID: "no-such-run", id: "s", step: "s", kind: .step, status: .succeeded))
        let outcomes = store.writeGroup([finishing("r1"), broken, finishing("r3")])
        #expect(outcomes.map { (try? $0.get()) != nil } == [true, false, true])
        for id in ["r1", "r3"] {
            #expect(try store.run(id)?.status == .succeeded)
            #expect(try store.run(id)?.owner == nil, "released by its batch")
            #expect(try store.steps(ofRun: id).map(\.status) == [.succeeded])
            #expect(try store.events(runID: id, afterSeq: 0, limit: 10).map(\.type) == [.runAdded, .runFinished])
        }
        // Nothing of the failed batch, not even what it wrote before the failing statement.
        #expect(try store.run("r2")?.status == .running)
        #expect(try store.run("r2")?.owner == owner)
        #expect(try store.steps(ofRun: "r2").isEmpty)
        #expect(try store.events(runID: "r2", afterSeq: 0, limit: 10).map(\.type) == [.runAdded])
        // The store goes on: the same run's next commit is a group of its own.
        try store.commit(finishing("r2"))
        #expect(try store.run("r2")?.status == .succeeded)
    }

    /// A member refused by its fence is left out; its neighbours' events keep their order.
    @Test func aFencedOutMemberLeavesTheOthersInOrder() throws {
        let store = try store()
        let stranger = OwnerIdentity(node: "stranger", pid: 2, startTime: 2)
        var foreign = finishing("r2")
        foreign.fence = ("r2", stranger)
        let outcomes = store.writeGroup([finishing("r1"), foreign, finishing("r3")])
        #expect(outcomes.map { (try? $0.get()) != nil } == [true, false, true])
        if case .failure(StoreError.ownershipLost(let runID)) = outcomes[1] {
            #expect(runID == "r2")
        } else {
            Issue.record("expected ownershipLost, got \(outcomes[1])")
        }
        #expect(try store.run("r2")?.status == .running)
        let finished = try store.storedEvents(runID: nil, afterSeq: 0, limit: 100).filter { $0.type == .runFinished }
        #expect(finished.map(\.runID) == ["r1", "r3"])
    }
}

/// `CommitGroup` itself: callers that arrive while a group is being written share the next
/// one, and each gets its own outcome.
@Suite struct CommitGroupTests {
    struct Refused: Error { let work: Int }

    @Test func waitingCallersShareTheNextGroupAndGetTheirOwnOutcomes() throws {
        let sizes = Collected<Int>()
        let firstWriting = DispatchSemaphore(value: 0)
        let releaseFirst = DispatchSemaphore(value: 0)
        let group = CommitGroup<Int> { works in
            if works == [0] {
                firstWriting.signal()
                releaseFirst.wait()
            }
            sizes.add(works.count)
            return works.map { $0 % 2 == 0 ? .success(()) : .failure(Refused(work: $0)) }
        }
        let outcomes = Collected<(Int, Bool)>()
        let done = DispatchGroup()
        func commit(_ work: Int) {
            done.enter()
            Thread {
                outcomes.add((work, (try? group.commit(work)) != nil))
                done.leave()
            }.start()
        }
        commit(0)
        firstWriting.wait()
        for work in 1...8 { commit(work) }
        Thread.sleep(forTimeInterval: 0.3)  // the eight queue up behind the first group
        releaseFirst.signal()
        #expect(done.wait(timeout: .now() + 30) == .success)
        #expect(sizes.all == [1, 8])
        #expect(outcomes.all.sorted { $0.0 < $1.0 }.map(\.1) == (0...8).map { $0 % 2 == 0 })
    }
}
