import Foundation
import OrchestrateEngine
import OrchestrateJSON
import OrchestrateOperations
import OrchestrateStore
import Testing

/// `RunDocument.detailBytes` writes a run detail without building its steps' objects (the HTTP
/// API's run detail); it must be the very text `detail` gives, written as `jsonText` writes it.
struct RunDocumentTests {
    @Test func detailBytesAreTheTextOfDetail() throws {
        var run = RunRecord(id: "r\"1</script>", workflowName: "up\u{e9}load", workflowFile: "/w/a b.yaml",
                            workflowSource: "", inputs: ["source": "/data/\"x\".mov", "n": 3], status: .failed,
                            createdAt: 1_700_000_000.25, runDir: "/tmp/r", priority: -2, labels: ["team": "<b>media</b>"])
        run.startedAt = 1_700_000_001
        run.finishedAt = 1_700_000_009.125
        run.error = "upload: \"bad\"\n"
        run.outputs = ["url": "https://example.com/v/1"]
        run.maxRate = 8 << 20

        var done = StepRecord(runID: run.id, id: "upload[3]", step: "upload", kind: .item, status: .succeeded)
        done.attempt = 2
        done.startedAt = 1_700_000_002.5
        done.finishedAt = 1_700_000_004
        done.outputs = ["bytes": 1024, "hash": "sha256:ab", "nested": ["a": [1, 2.5, nil]]]
        done.idempotencyKey = "key-\u{1F600}"
        done.node = "node-a"
        var failed = StepRecord(runID: run.id, id: "activate", step: "activate", kind: .step, status: .failed)
        failed.attempt = 3
        failed.startedAt = 1_700_000_001  // started first: listed first
        failed.finishedAt = 1_700_000_008
        failed.errorKind = "permanent"
        failed.errorMessage = "HTTP 422: \\ \u{0001}"
        let pending = StepRecord(runID: run.id, id: "b-pending", step: "b", kind: .step, status: .pending)
        let pendingToo = StepRecord(runID: run.id, id: "a-pending", step: "a", kind: .step, status: .pending)
        let progress = EventRecord(seq: 7, runID: run.id, time: 1_700_000_003, type: .stepProgress, step: "upload[3]",
                                   data: ["bytes": 512, "total": 1024])
        let record = RunDetailRecord(run: run, steps: [pending, done, pendingToo, failed], items: [], progress: [progress])

        let graph = ["graph": #"{"edges":[],"nodes":[{"id":"upload"}]}"#]
        let expected = JSONObjectText.bytes(try #require(RunDocument.detail(record).objectValue), adding: graph)
        #expect(String(decoding: RunDocument.detailBytes(record, adding: graph), as: UTF8.self)
                == String(decoding: expected, as: UTF8.self))

        // Without steps or added texts too, and the text parses to the same value.
        let bare = RunDetailRecord(run: run, steps: [], items: [], progress: [])
        let bareBytes = RunDocument.detailBytes(bare)
        #expect(bareBytes == RunDocument.detail(bare).jsonBytes)
        #expect(try JSONValue(parsing: bareBytes) == RunDocument.detail(bare))
    }

    /// A run's transfer figures count the bytes its attempts moved (`bytes_moved`) over the time
    /// they spent moving them (`since` to their latest report, overlaps once): not the bytes a
    /// resumed attempt found on disk, nor the hours the run lay dead. The ETA is given only while
    /// the run is running (its owner alive), never once it is interrupted or paused.
    @Test func transferFiguresAreOfTheBytesMovedAndGiveAnETAOnlyWhileRunning() throws {
        var run = RunRecord(id: "r", workflowName: "w", workflowFile: "/w.yaml", workflowSource: "", inputs: [:],
                            status: .running, createdAt: 1000, runDir: "/tmp/r")
        run.startedAt = 1000
        run.ownerIsLive = true
        let mib: Int64 = 1 << 20
        // A download resumed at 4000 (dead from 1030): 60 MiB on disk, 20 MiB moved since, in 10 s.
        let download = EventRecord(seq: 1, runID: "r", time: 4010, type: .stepProgress, step: "download",
                                   data: ["bytes_done": .int(80 * mib), "bytes_total": .int(100 * mib), "bytes_moved": .int(20 * mib),
                                          "since": 4000.0])
        // A second step moving at the same time: 10 MiB over 4005...4010, within the first's span.
        let other = EventRecord(seq: 2, runID: "r", time: 4010, type: .stepProgress, step: "copy",
                                data: ["bytes_done": .int(10 * mib), "bytes_total": -1, "bytes_moved": .int(10 * mib), "since": 4005.0])
        let stats = TransferStatistics.of(run, progress: [download, other], now: 4010)
        #expect(stats.bytesDone == 90 * mib)
        #expect(stats.averageRate == Double(3 * mib), "30 MiB in 10 s of moving: \(stats.averageRate / Double(mib)) MiB/s")
        #expect(abs((stats.remaining ?? 0) - 10.0 / 3) < 1e-9, "the 10 MiB left of the 100 MiB announced at 3 MiB/s: \(String(describing: stats.remaining))")

        run.ownerIsLive = false  // its process died: interrupted, no ETA
        #expect(RunDocument.effectiveStatus(run) == "interrupted")
        #expect(TransferStatistics.of(run, progress: [download, other], now: 4010).remaining == nil)
        run.status = .paused
        #expect(TransferStatistics.of(run, progress: [download, other], now: 4010).remaining == nil)
        #expect(TransferStatistics.coveredSeconds([(0, 5), (3, 8), (10, 12), (11, 11.5)]) == 10)
    }

    /// `summariesBytes` (the API's run list) is the text of `["runs": summaries]`, for a run with
    /// every optional member and one with none, a live owner and hostile text.
    @Test func summariesBytesAreTheTextOfSummaries() throws {
        let directory = NSTemporaryDirectory() + "rundoc-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let store = try SQLiteStateStore(directory: directory)
        var full = RunRecord(id: "r\"2</script>", workflowName: "up\u{e9}load", workflowFile: "/w/a b.yaml", workflowSource: "",
                             inputs: ["source": "/data/\"x\".mov", "n": 3.5], status: .running, createdAt: 1_700_000_000.25,
                             runDir: "/tmp/r", priority: 7, labels: ["team": "<b>media</b>", "a": "\u{1F600}"])
        full.startedAt = 1_700_000_001
        full.finishedAt = 1_700_000_009.125
        full.error = "upload: \"bad\"\n"
        full.outputs = ["url": "https://example.com/v/1"]
        full.maxRate = 8 << 20
        full.maxRateTimetable = "08:00,512K 23:00,off"
        full.owner = OwnerIdentity(node: "node-<a>", pid: 42, startTime: 1)
        full.ownerIsLive = true
        full.queue = "night\\q"
        let bare = RunRecord(id: "r3", workflowName: "w", workflowFile: "/w.yaml", workflowSource: "", inputs: [:],
                             status: .queued, createdAt: 1_700_000_000, runDir: "/tmp/r3")
        var dead = full
        dead.id = "r4"
        dead.ownerIsLive = false  // shown as interrupted, without node or owner
        let runs = [full, bare, dead]
        let expected = JSONValue.object(["runs": .array(try RunDocument.summaries(runs, store: store))]).jsonBytes
        #expect(String(decoding: try RunDocument.summariesBytes(runs, store: store), as: UTF8.self)
                == String(decoding: expected, as: UTF8.self))
        #expect(try RunDocument.summariesBytes([], store: store) == Array(#"{"runs":[]}"#.utf8))
    }
}
