import Foundation
import OrchestrateJSON
import OrchestrateStore
import OrchestrateTestSupport
import Testing

/// A run's events without those about one file already journaled
/// (`storedEvents(runID:afterSeq:withoutFileEventsThrough:limit:)`), on both stores: what a run
/// page opened on a session of 100,000 files reads instead of the session's whole journal.
@Suite(.serialized) struct RunEventsStoreContractTests {
    /// A session "s" with files handed over by a watch folder and sent, another run "o" and the
    /// queue's events between them; then, after `filesThrough`, more of each. Returns every
    /// event of "s" and the seq of the last event before the second part.
    static func journal(_ t: StoreUnderTest) throws -> (session: [StoredEvent], filesThrough: Int64) {
        try t.makeRun("s")
        try t.makeRun("o")
        func file(_ n: Int) -> [EventRecord] {
            [EventRecord(runID: "s", time: 2, type: .watchHandedOver, data: ["path": .string("f\(n)")]),
             EventRecord(runID: "s", time: 2, type: .itemAdded, step: "accept", data: ["id": .string("\(n)")]),
             EventRecord(runID: "s", time: 3, type: .itemStarted, step: "accept", data: ["id": .string("\(n)")]),
             EventRecord(runID: "o", time: 3, type: .stepProgress, step: "copy", data: ["bytes_done": .int(Int64(n))]),
             EventRecord(runID: "s", time: 4, type: .itemFinished, step: "accept", data: ["id": .string("\(n)")]),
             EventRecord(runID: "s", time: 4, type: .watchFinished, data: ["path": .string("f\(n)")])]
        }
        try t.store.appendEvents([EventRecord(runID: "s", time: 2, type: .stepStarted, step: "accept"),
                                  EventRecord(runID: nil, time: 2, type: .workerStarted)])
        for n in 0 ..< 30 {
            var batch = file(n)
            if n % 10 == 9 { batch.append(EventRecord(runID: "s", time: 4, type: .stepProgress, step: "accept", data: ["files_done": .int(Int64(n + 1))])) }
            try t.store.appendEvents(batch)
        }
        let filesThrough = try #require(try t.store.storedEvents(runID: nil, afterSeq: 0, limit: 10_000).last?.seq)
        // After the page opened: a new file, and the session's end.
        try t.store.appendEvents(file(30) + [EventRecord(runID: "s", time: 5, type: .sessionClosed, step: "accept"),
                                             EventRecord(runID: "s", time: 5, type: .stepSucceeded, step: "accept"),
                                             EventRecord(runID: "s", time: 5, type: .runFinished)])
        return (try t.store.storedEvents(runID: "s", afterSeq: 0, limit: 10_000), filesThrough)
    }

    /// Every page of `limit` after `after`, one after the other, until a page is short.
    static func pages(_ store: any StateStore, after: Int64, filesThrough: Int64, limit: Int) throws -> [[StoredEvent]] {
        var pages: [[StoredEvent]] = [], cursor = after
        while pages.count < 100 {
            let page = try store.storedEvents(runID: "s", afterSeq: cursor, withoutFileEventsThrough: filesThrough, limit: limit)
            pages.append(page)
            guard page.count == limit, let last = page.last?.seq else { break }
            cursor = last
        }
        return pages
    }

    static func summary(_ events: [StoredEvent]) -> [String] {
        events.map { "\($0.seq) \($0.runID ?? "-") \($0.type.rawValue) \($0.step ?? "-") \($0.dataText)" }
    }

    @Test(arguments: StoreKind.allCases)
    func theRunsEventsComeWithoutItsFileEventsUpToTheSeqGiven(_ kind: StoreKind) throws {
        let t = try StoreUnderTest(kind)
        let (session, filesThrough) = try Self.journal(t)
        #expect(session.filter(\.isFileEvent).count == 31 * 5)
        let wanted = session.filter { !$0.isFileEvent || $0.seq > filesThrough }
        // run.added, step.started, three step.progress; then the new file's five and the end.
        #expect(wanted.map(\.type) == [.runAdded, .stepStarted, .stepProgress, .stepProgress, .stepProgress,
                                       .watchHandedOver, .itemAdded, .itemStarted, .itemFinished, .watchFinished,
                                       .sessionClosed, .stepSucceeded, .runFinished])
        let all = try t.store.storedEvents(runID: "s", afterSeq: 0, withoutFileEventsThrough: filesThrough, limit: 1000)
        #expect(Self.summary(all) == Self.summary(wanted))

        // Paged: pages of at most `limit`, each after the last seq of the one before, together
        // the same events in the same order.
        for limit in [1, 2, 4, 5] {
            let pages = try Self.pages(t.store, after: 0, filesThrough: filesThrough, limit: limit)
            #expect(pages.allSatisfy { $0.count <= limit }, "limit \(limit)")
            #expect(Self.summary(pages.flatMap { $0 }) == Self.summary(wanted), "limit \(limit)")
        }
        // From a seq in the middle (a client resuming): only what follows it.
        let middle = wanted[3].seq
        #expect(Self.summary(try t.store.storedEvents(runID: "s", afterSeq: middle, withoutFileEventsThrough: filesThrough, limit: 1000))
                == Self.summary(wanted.filter { $0.seq > middle }))
        // 0 leaves nothing out: the run's whole journal, as `storedEvents(runID:afterSeq:limit:)`.
        #expect(Self.summary(try t.store.storedEvents(runID: "s", afterSeq: 0, withoutFileEventsThrough: 0, limit: 1000))
                == Self.summary(session))
        // Another run's events and the queue's never come; a run without events reads nothing.
        #expect(try t.store.storedEvents(runID: "o", afterSeq: 0, withoutFileEventsThrough: filesThrough, limit: 1000)
            .allSatisfy { $0.runID == "o" })
        #expect(try t.store.storedEvents(runID: "nope", afterSeq: 0, withoutFileEventsThrough: filesThrough, limit: 10).isEmpty)
        // What another process of the same store reads is the same.
        #expect(Self.summary(try t.reopen().storedEvents(runID: "s", afterSeq: 0, withoutFileEventsThrough: filesThrough, limit: 1000))
                == Self.summary(wanted))
    }
}
