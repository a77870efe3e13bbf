import Foundation
import OrchestrateEngine
import OrchestrateOperations
import OrchestrateStore
import OrchestrateTestSupport
import Testing

/// The sweep of a node's run directories (`RunDirectorySweeper`), on both stores: the
/// directory of a run the store removed goes (pruned by another node, or by this one that died
/// before removing it), and nothing else does: not a directory of a run the store holds, not a
/// folder another store shares, not what a symbolic link points to.
@Suite(.serialized) struct RunDirectorySweeperTests {
    let dir = TemporaryDirectory("sweep")

    func open(_ kind: StoreKind, _ name: String) throws -> any StateStore { try kind.open(in: dir, name) }

    /// Makes run `id` in `store`, finished (or still running), with a file in its directory
    /// under `state`, as the engine leaves it.
    func run(_ id: String, in store: any StateStore, state: String, finished: Bool = true) throws {
        var run = RunRecord(id: id, workflowName: "wf", workflowFile: "/wf.yaml", workflowSource: "name: wf",
                            inputs: [:], status: .running, createdAt: 1, runDir: RunRecord.runDirectory(for: id))
        try store.createRun(run, events: [EventRecord(runID: id, time: 1, type: .runAdded)])
        try RunsFolderOwners.register(store.storeIdentity(), stateDirectory: state)
        try FileManager.default.createDirectory(atPath: state + "/runs/" + id + "/out", withIntermediateDirectories: true)
        try Data("frame".utf8).write(to: URL(fileURLWithPath: state + "/runs/" + id + "/out/frame.dpx"))
        guard finished else { return }
        run.status = .succeeded
        run.finishedAt = try store.now() - 86_400
        var batch = JournalBatch()
        batch.runUpdates = [run]
        batch.events = [EventRecord(runID: id, time: 2, type: .runFinished)]
        try store.commit(batch)
    }

    func exists(_ path: String) -> Bool {
        var info = stat()
        return lstat(path, &info) == 0
    }

    @Test(arguments: StoreKind.allCases)
    func theDirectoriesOfRunsGoneFromTheStoreGoAndNothingElse(_ kind: StoreKind) throws {
        let store = try open(kind, "store")
        let state = dir.file("node").path
        let runs = state + "/runs"
        // Outside the runs folder: what planted links point to, which must stay.
        let outside = dir.file("outside").path
        try FileManager.default.createDirectory(atPath: outside + "/deep", withIntermediateDirectories: true)
        try Data("keep".utf8).write(to: URL(fileURLWithPath: outside + "/keep.txt"))
        try Data("keep".utf8).write(to: URL(fileURLWithPath: outside + "/deep/keep.txt"))

        // pruned: a deep directory of many files, with a link to `outside` inside it.
        try run("pruned", in: store, state: state)
        for i in 0..<2_500 { _ = FileManager.default.createFile(atPath: runs + "/pruned/out/f\(i)", contents: Data([1])) }
        try FileManager.default.createDirectory(atPath: runs + "/pruned/a/b/c/d", withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(atPath: runs + "/pruned/a/b/c/d/escape", withDestinationPath: outside)
        try FileManager.default.createSymbolicLink(atPath: runs + "/pruned/escape-file", withDestinationPath: outside + "/keep.txt")
        // linked: its directory replaced by a link to `outside`, the link left as it is.
        try run("linked", in: store, state: state)
        try FileManager.default.removeItem(atPath: runs + "/linked")
        try FileManager.default.createSymbolicLink(atPath: runs + "/linked", withDestinationPath: outside)
        // reused: pruned, then its id used again by a new run, whose directory this is now.
        try run("reused", in: store, state: state)
        try run("live", in: store, state: state, finished: false)
        try run("kept", in: store, state: state)
        // A directory no run of the store ever named.
        try FileManager.default.createDirectory(atPath: runs + "/stranger", withIntermediateDirectories: true)

        // Removed from the store without their directories (another node pruned them, or this
        // one died between the store's delete and the directory's removal).
        #expect(try store.pruneRuns(["pruned", "linked", "reused"]).count == 3)
        try run("reused", in: store, state: state, finished: false)

        var report = try RunDirectorySweeper.sweep(store: store, stateDirectory: state)
        #expect(report.removed == ["pruned"], "\(report)")
        #expect(report.failures.isEmpty && report.refused == nil, "\(report)")
        #expect(!exists(runs + "/pruned"))
        #expect(exists(outside + "/keep.txt") && exists(outside + "/deep/keep.txt"))
        #expect(exists(runs + "/linked"), "a link in a run directory's place is not removed")
        for id in ["reused", "live", "kept"] { #expect(exists(runs + "/" + id + "/out/frame.dpx"), "\(id)") }
        #expect(exists(runs + "/stranger"))

        // From where it stopped: nothing new, nothing removed; then a deleted run's directory.
        report = try RunDirectorySweeper.sweep(store: store, stateDirectory: state)
        #expect(report.removed.isEmpty)
        try store.deleteRun("kept")
        report = try RunDirectorySweeper.sweep(store: store, stateDirectory: state)
        #expect(report.removed == ["kept"])
        #expect(!exists(runs + "/kept") && exists(runs + "/live/out/frame.dpx"))
    }

    @Test(arguments: StoreKind.allCases)
    func aRunsFolderAnotherStoreSharesIsLeftAlone(_ kind: StoreKind) throws {
        let store = try open(kind, "mine"), other = try open(kind, "theirs")
        let state = dir.file("shared").path
        try run("mine-1", in: store, state: state)
        // The other store's engine made a directory here too: it named its store first.
        try run("theirs-1", in: other, state: state)
        #expect(try RunsFolderOwners.read(folder: state + "/runs") == [try store.storeIdentity(), try other.storeIdentity()])
        #expect(try store.pruneRuns(["mine-1"]).count == 1)
        let report = try RunDirectorySweeper.sweep(store: store, stateDirectory: state)
        #expect(report.removed.isEmpty)
        #expect(report.refused?.contains("2 stores") == true, "\(report)")
        #expect(exists(state + "/runs/mine-1/out/frame.dpx") && exists(state + "/runs/theirs-1/out/frame.dpx"))
    }

    @Test func aListOfStoresPlantedAsALinkIsRefused() throws {
        let store = try open(.sqlite, "store")
        let state = dir.file("planted").path
        try run("r1", in: store, state: state)
        #expect(try store.pruneRuns(["r1"]).count == 1)
        // A list elsewhere naming this store alone, linked in place of the folder's own.
        let elsewhere = dir.write("list", try store.storeIdentity() + "\n").path
        try FileManager.default.removeItem(atPath: state + "/runs/" + RunsFolderOwners.fileName)
        try FileManager.default.createSymbolicLink(atPath: state + "/runs/" + RunsFolderOwners.fileName, withDestinationPath: elsewhere)
        #expect(throws: RunsFolderOwners.OwnersError.self) { try RunDirectorySweeper.sweep(store: store, stateDirectory: state) }
        #expect(exists(state + "/runs/r1/out/frame.dpx"))
    }
}
