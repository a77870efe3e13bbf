import Foundation
import OrchestrateJSON
import OrchestrateStore
import OrchestrateTestSupport
import Testing

/// The store's identity and the runs it removed (`storeIdentity`, `goneRuns`), on both stores:
/// what each node's run directory sweep works from.
@Suite(.serialized) struct GoneRunsStoreContractTests {
    @Test(arguments: StoreKind.allCases)
    func theIdentityIsMadeOnceAndSharedByEveryProcessOfTheStore(_ kind: StoreKind) throws {
        let t = try StoreUnderTest(kind)
        let first = try t.store.storeIdentity()
        #expect(first.count == 36, "a UUID: \(first)")
        #expect(try t.store.storeIdentity() == first)
        // Another process on the same store sees the same; another store has its own.
        #expect(try t.reopen().storeIdentity() == first)
        let other = try StoreUnderTest(kind)
        #expect(try other.store.storeIdentity() != first)
    }

    @Test(arguments: StoreKind.allCases)
    func goneRunsNamesPrunedAndDeletedRunsTheStoreNoLongerHolds(_ kind: StoreKind) throws {
        let t = try StoreUnderTest(kind)
        #expect(try t.store.goneRuns(afterSeq: 0, limit: 10) == GoneRuns(ids: [], through: 0))
        for id in ["a", "b", "c"] { try t.finishedRun(id, age: 40 * 86_400) }
        try t.makeRun("live", status: .running)
        let start = try t.store.storedEvents(runID: nil, afterSeq: 0, limit: 1000).map(\.seq).max() ?? 0
        // Nothing removed yet: the read moves past what it saw, finding nothing.
        let none = try t.store.goneRuns(afterSeq: 0, limit: 10)
        #expect(none.ids.isEmpty && none.through == start)

        #expect(try t.store.pruneRuns(["a", "b"]).map(\.id).sorted() == ["a", "b"])
        try t.store.deleteRun("c")
        let all = try t.store.goneRuns(afterSeq: start, limit: 10)
        #expect(all.ids == ["a", "b", "c"] || all.ids == ["b", "a", "c"], "\(all.ids)")
        #expect(all.through > start)
        // A page of one event: the pruned pair, then the deleted run, then nothing.
        let page1 = try t.store.goneRuns(afterSeq: start, limit: 1)
        #expect(Set(page1.ids) == ["a", "b"])
        let page2 = try t.store.goneRuns(afterSeq: page1.through, limit: 1)
        #expect(page2.ids == ["c"])
        let page3 = try t.store.goneRuns(afterSeq: page2.through, limit: 1)
        #expect(page3.ids.isEmpty && page3.through == all.through)

        // An id used again by a new run is not gone: its directory is that run's now.
        try t.makeRun("b", status: .queued)
        #expect(try t.store.goneRuns(afterSeq: start, limit: 10).ids == ["a", "c"])
    }
}
