import Foundation
import OrchestrateEngine
import OrchestrateJSON
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
}
