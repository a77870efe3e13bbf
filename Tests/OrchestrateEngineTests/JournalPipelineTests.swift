import Foundation
@testable import OrchestrateEngine
import OrchestrateStore
import Synchronization
import Testing

/// `JournalPipeline` against the harness's real store (SQLite, or PostgreSQL with
/// `ORCHESTRATE_TEST_STORE=postgres`): what a round's `afterCommit` may rely on, group commit,
/// and a failed commit.
@Suite struct JournalPipelineTests {
    let h = Harness()

    /// A run owned by this process, in a fresh store.
    func storeWithRun() throws -> any StateStore {
        let store = try h.openStore()
        try store.createRun(RunRecord(id: "r1", workflowName: "wf", workflowFile: "/wf.yaml", workflowSource: "", inputs: [:],
                                      status: .running, createdAt: 1, runDir: "runs/r1"), events: [])
        #expect(try store.claimRun("r1", owner: OwnerIdentity.current, lease: 60))
        return store
    }

    /// One round: step `id` running, and its `step.started` event, fenced by `owner`.
    func round(_ id: String, owner: OwnerIdentity = .current) -> JournalBatch {
        var batch = JournalBatch()
        batch.stepUpserts = [StepRecord(runID: "r1", id: id, step: id, kind: .step, status: .running)]
        batch.events = [EventRecord(runID: "r1", time: 1, type: EventType.stepStarted, step: id)]
        batch.fence = ("r1", owner)
        return batch
    }

    /// Runs each writer job on a thread of its own, as the executor's attempt threads do.
    static func onNewThread(_ job: @escaping @Sendable () -> Void) { Thread { job() }.start() }

    /// What a round's `afterCommit` does (start its attempts) relies on the round being durable:
    /// another connection to the store sees its step and its event by then.
    @Test func afterCommitRunsOnceTheRoundIsDurable() throws {
        let store = try storeWithRun()
        let reader = try h.openStore()
        let seen = Mutex<[String: Bool]>([:])
        let pipeline = JournalPipeline(store: store, startWriter: Self.onNewThread, committed: { _ in },
                                       failed: { Issue.record("commit failed: \($0)") })
        for index in 0 ..< 50 {
            let id = "s\(index)"
            pipeline.submit(round(id)) {
                let durable = ((try? reader.steps(ofRun: "r1")) ?? []).contains { $0.id == id }
                    && ((try? reader.events(runID: "r1", afterSeq: 0, limit: 1000)) ?? []).contains { $0.step == id }
                seen.withLock { $0[id] = durable }
            }
        }
        pipeline.waitUntilIdle()
        let result = seen.withLock { $0 }
        #expect(result.count == 50)
        #expect(result.values.allSatisfy { $0 }, "acted on before durable: \(result.filter { !$0.value }.keys.sorted())")
    }

    /// Rounds queued while the writer is busy are committed in one transaction, and acted on in
    /// the order they were submitted; their events keep that order in the journal.
    @Test func roundsQueuedDuringACommitAreCommittedTogetherInOrder() throws {
        let store = try storeWithRun()
        let writerJob = Mutex<(@Sendable () -> Void)?>(nil)
        let commits = Mutex(0)
        let order = Mutex<[String]>([])
        let pipeline = JournalPipeline(store: store, startWriter: { job in writerJob.withLock { $0 = job } },
                                       committed: { _ in commits.withLock { $0 += 1 } },
                                       failed: { Issue.record("commit failed: \($0)") })
        // The writer has not started yet (its thread is slow to come): three rounds queue up.
        for id in ["a", "b", "c"] {
            pipeline.submit(round(id)) { order.withLock { $0.append(id) } }
        }
        #expect(!pipeline.isIdle)
        let job = try #require(writerJob.withLock { $0 })
        Self.onNewThread(job)
        pipeline.waitUntilIdle()
        #expect(commits.withLock { $0 } == 1)
        #expect(order.withLock { $0 } == ["a", "b", "c"])
        #expect(try store.events(runID: "r1", afterSeq: 0, limit: 10).compactMap(\.step) == ["a", "b", "c"])
        #expect(Set(try store.steps(ofRun: "r1").map(\.id)) == ["a", "b", "c"])
    }

    /// A commit the store refuses (the run is no longer ours) is reported once; neither that
    /// round nor any later one is acted on, and later submissions are dropped.
    @Test func aFailedCommitStopsThePipeline() throws {
        let store = try storeWithRun()
        let writerJob = Mutex<(@Sendable () -> Void)?>(nil)
        let failures = Mutex<[String]>([])
        let actedOn = Mutex<[String]>([])
        let pipeline = JournalPipeline(store: store, startWriter: { job in writerJob.withLock { $0 = job } },
                                       committed: { _ in },
                                       failed: { error in failures.withLock { $0.append("\(error)") } })
        let stranger = OwnerIdentity(node: "elsewhere", pid: 1, startTime: 1)
        pipeline.submit(round("a", owner: stranger)) { actedOn.withLock { $0.append("a") } }
        pipeline.submit(round("b")) { actedOn.withLock { $0.append("b") } }
        let job = try #require(writerJob.withLock { $0 })
        Self.onNewThread(job)
        pipeline.waitUntilIdle()
        pipeline.submit(round("c")) { actedOn.withLock { $0.append("c") } }
        pipeline.waitUntilIdle()
        #expect(failures.withLock { $0 }.count == 1)
        #expect(failures.withLock { $0 }.first?.contains("r1") == true, "\(failures.withLock { $0 })")
        #expect(actedOn.withLock { $0 }.isEmpty)
        #expect(try store.steps(ofRun: "r1").isEmpty)
    }
}
