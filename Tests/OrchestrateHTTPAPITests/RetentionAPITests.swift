import Foundation
import OrchestrateJSON
import OrchestrateTestSupport
import Testing

/// A client resuming the journal from a seq that retention pruned is told so, on the event
/// stream (`event: pruned`) and in `/api/journal` (`pruned_through`), never left with a silent gap.
@Suite(.serialized) struct RetentionAPITests {
    @Test func aStreamResumedFromAPrunedSeqIsToldFirst() throws {
        let serve = try APIServe(extra: ["--no-prune"])
        let file = serve.dir.write("wf.yaml", """
            version: 1
            name: short
            steps:
              a: { uses: test.noop }
            """).path
        #expect(try serve.orchestrate(["run", file]).status == 0)
        let firstSeq = try #require(try serve.get("/api/journal?after=0&limit=1").json["events"]?.arrayValue?.first?["seq"]?.intValue)
        #expect(try serve.get("/api/journal?after=0").json["pruned_through"]?.intValue == 0)
        Thread.sleep(forTimeInterval: 1.2)
        let pruned = try serve.orchestrate(["prune", "--older-than", "1s"])
        #expect(pruned.status == 0 && pruned.stdout.contains("pruned 1 finished run"), "\(pruned.stdout)\(pruned.stderr)")
        let through = try #require(try serve.get("/api/journal?after=0").json["pruned_through"]?.intValue)
        #expect(through > firstSeq)

        // Resuming before the pruned seqs: the notice comes first, then what remains, the
        // runs.pruned event among it.
        let text = try serve.streamText("/api/events", headers: ["Last-Event-ID": "\(firstSeq)"]) { $0.contains("runs.pruned") }
        let notice = try #require(text.range(of: "event: pruned\ndata: "))
        let line = text[notice.upperBound...].prefix { $0 != "\n" }
        let data = try JSONValue(parsing: String(line))
        #expect(data["after"]?.intValue == firstSeq && data["pruned_through"]?.intValue == through)
        #expect(data["continue_after"]?.intValue == firstSeq)
        #expect(notice.lowerBound < text.range(of: "runs.pruned")!.lowerBound)
        // Resuming after them: no notice.
        let later = try serve.streamText("/api/events", headers: ["Last-Event-ID": "\(through)"]) { $0.contains("runs.pruned") }
        #expect(later.contains("runs.pruned") && !later.contains("event: pruned"))
    }
}
