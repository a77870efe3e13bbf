import Foundation
import OrchestrateJSON
import OrchestrateStore
import OrchestrateTestSupport
import Testing

/// The watch-folder part of the `StateStore` contract: a file version is handed over once, with
/// its work, in one transaction, however many processes try at once.
@Suite(.serialized) struct WatchHandOffContractTests {
    func newRun(_ id: String) -> RunRecord {
        RunRecord(id: id, workflowName: "wf", workflowFile: "/wf.yaml", workflowSource: "name: wf", inputs: ["f": .string(id)],
                  status: .queued, createdAt: 1, runDir: RunRecord.runDirectory(for: id))
    }

    func handedEvent(_ file: WatchedFile, _ runID: String) -> EventRecord {
        EventRecord(runID: runID, time: 1, type: EventType(rawValue: "watch.handed_over"), data: ["path": .string(file.path)])
    }

    @Test(arguments: StoreKind.allCases)
    func aFileVersionBecomesOneRunOnceAndANewVersionAgain(_ kind: StoreKind) throws {
        let t = try StoreUnderTest(kind)
        let file = WatchedFile(watch: "node/wf/in", path: "a.mov", size: 10, mtimeNanoseconds: 1_000)
        #expect(try t.store.handOver(file, as: .run(newRun("w1"), events: [EventRecord(runID: "w1", time: 1, type: .runAdded)]),
                                     events: [handedEvent(file, "w1")]))
        // The same version again (a restart, another serve): nothing, not even the run.
        #expect(try !t.reopen().handOver(file, as: .run(newRun("w2"), events: []), events: [handedEvent(file, "w2")]))
        #expect(try t.store.run("w2") == nil)
        #expect(try t.store.run("w1")?.status == .queued)
        #expect(try t.store.events(runID: "w1", afterSeq: 0, limit: 10).map(\.type.rawValue) == ["run.added", "watch.handed_over"])
        // The file replaced with new content later: a new version, handed over again.
        var replaced = file
        replaced.mtimeNanoseconds = 2_000
        #expect(try t.store.handOver(replaced, as: .run(newRun("w3"), events: []), events: []))
        // Another watch of the same file is its own.
        var other = file
        other.watch = "node/other/in"
        #expect(try t.store.handOver(other, as: .run(newRun("w4"), events: []), events: []))
        // A run id that exists fails the hand-off whole: the file stays new.
        let clash = WatchedFile(watch: "node/wf/in", path: "b.mov", size: 1, mtimeNanoseconds: 1)
        #expect(throws: StoreError.self) { try t.store.handOver(clash, as: .run(newRun("w1"), events: []), events: []) }
        #expect(try t.store.handOver(clash, as: .run(newRun("w5"), events: []), events: []))

        let all = try t.store.watchHandOffs(watch: "node/wf/in", pendingOnly: false)
        #expect(all.map(\.runID) == ["w1", "w3", "w5"])
        #expect(all.map(\.file) == [file, replaced, clash])
        #expect(all.allSatisfy { $0.outcome == .pending && $0.stepID == nil })
    }

    @Test(arguments: StoreKind.allCases)
    func aFileBecomesAnItemOfASessionAndIsFinishedOnce(_ kind: StoreKind) throws {
        let t = try StoreUnderTest(kind)
        try t.makeRun("feed")
        let file = WatchedFile(watch: "w", path: "sub/a.bin", size: 5, mtimeNanoseconds: 7)
        let item = WatchWork.item(runID: "feed", stepID: "accept", id: "i1", json: #"{"source":"/in/sub/a.bin","destination":"sub/a.bin"}"#,
                                  event: EventRecord(runID: "feed", time: 2, type: .itemAdded, step: "accept"))
        #expect(try t.store.handOver(file, as: item, events: [handedEvent(file, "feed")]))
        let again = WatchWork.item(runID: "feed", stepID: "accept", id: "i2", json: "{}", event: nil)
        #expect(try !t.store.handOver(file, as: again, events: []))
        #expect(try t.store.items(runID: "feed", stepID: "accept").map(\.id) == ["i1"])
        #expect(try t.store.events(runID: "feed", afterSeq: 0, limit: 10).map(\.type.rawValue)
            == ["run.added", "item.added", "watch.handed_over"])

        let pending = try t.store.watchHandOffs(watch: "w", pendingOnly: true)
        #expect(pending.count == 1 && pending[0].stepID == "accept" && pending[0].itemID == "i1" && pending[0].runID == "feed")
        // Only one process records the outcome (and so applies the file's `after:` action).
        #expect(try t.store.finishHandOff(file, outcome: .done, events: [EventRecord(runID: "feed", time: 3, type: .itemFinished)]))
        #expect(try !t.reopen().finishHandOff(file, outcome: .left, events: []))
        #expect(try t.store.watchHandOffs(watch: "w", pendingOnly: true).isEmpty)
        #expect(try t.store.watchHandOffs(watch: "w", pendingOnly: false).map(\.outcome) == [.done])
    }

    /// A watcher reads its hand-offs a page at a time when it starts: in the order of the
    /// versions (path, size, mtime), each once, only its own watch's.
    @Test(arguments: StoreKind.allCases)
    func handOffsAreReadAPageAtATimeInTheOrderOfTheVersions(_ kind: StoreKind) throws {
        let t = try StoreUnderTest(kind)
        try t.makeRun("feed")
        let files = ["shot02/b", "shot01/z", "shot01/a", "shot10/a", "a", "shot01/a"].enumerated().map { i, path in
            WatchedFile(watch: "w", path: path, size: i == 5 ? 1 : 2, mtimeNanoseconds: Int64(100 - i))
        } + [WatchedFile(watch: "w", path: "shot01/a", size: 2, mtimeNanoseconds: 1)]
        for (i, file) in (files + [WatchedFile(watch: "other", path: "shot01/b", size: 1, mtimeNanoseconds: 1)]).enumerated() {
            #expect(try t.store.handOver(file, as: .item(runID: "feed", stepID: "accept", id: "i\(i)", json: "{}", event: nil), events: []))
        }
        var read: [WatchedFile] = []
        var after: WatchedFile?
        while true {
            let page = try t.store.watchHandOffs(watch: "w", after: after, limit: 3)
            #expect(page.count <= 3)
            read += page.map(\.file)
            guard page.count == 3 else { break }
            after = page.last?.file
        }
        // The paths' order is the database's collation; each version comes once, all of them.
        #expect(read.count == files.count && Set(read) == Set(files))
        #expect(try t.store.watchHandOffs(watch: "w", after: read.last, limit: 3).isEmpty)
    }

    @Test(arguments: StoreKind.allCases)
    func manyProcessesHandingOverTheSameFilesMakeOneRunEach(_ kind: StoreKind) throws {
        let t = try StoreUnderTest(kind)
        let stores = try (0..<4).map { _ in try t.reopen() }
        let won = Collected<String>()
        DispatchQueue.concurrentPerform(iterations: 4) { worker in
            for i in 0..<40 {
                let file = WatchedFile(watch: "w", path: "f\(i)", size: Int64(i), mtimeNanoseconds: 1)
                let id = "r\(i)-by\(worker)"
                if (try? stores[worker].handOver(file, as: .run(newRun(id), events: []), events: [])) == true { won.add(id) }
            }
        }
        #expect(won.all.count == 40)
        #expect(Set(won.all.map { $0.split(separator: "-")[0] }).count == 40)
        #expect(try t.store.listRuns(RunFilter()).count == 40)
    }
}
