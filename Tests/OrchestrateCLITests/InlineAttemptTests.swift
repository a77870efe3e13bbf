import Foundation
import OrchestrateJSON
import OrchestrateTestSupport
import Testing

/// A run's lone attempt runs on the loop's own thread (no hand-over to an attempt thread and
/// back), lent while it is quick: one that runs longer keeps the thread and the loop goes on
/// on another, so timeouts, cancellation and abandonment act as they do on attempt threads,
/// and the journal's order is unchanged.
@Suite struct InlineAttemptTests {
    let h = Harness()

    func probePlugin() throws -> String {
        try CCompiler.buildFixture("hostprobe", into: h.dir.url).path
    }

    /// The steps' `step.*` events of a `--json` run, as "type step" in their order.
    static func stepEvents(_ result: ProcessResult) -> [String] {
        Harness.events(result).compactMap { event in
            guard let type = event["type"]?.stringValue, type.hasPrefix("step."),
                  let step = event["step"]?.stringValue else { return nil }
            return "\(type) \(step)"
        }
    }

    @Test func aChainsQuickStepsRunOnTheLoopsThreadAndASlowOneHandsTheLoopOn() throws {
        let probe = try probePlugin()
        let file = h.workflow("""
            version: 1
            name: chain
            steps:
              a: { uses: probe.thread }
              b: { uses: probe.thread, needs: [a] }
              slow: { uses: test.sleep, with: { ms: 500 }, needs: [b] }
              c: { uses: probe.thread, needs: [slow] }
              d: { uses: probe.thread, needs: [c] }
            outputs:
              names: "${{ format('{0},{1},{2},{3}', steps.a.outputs.name, steps.b.outputs.name, steps.c.outputs.name, steps.d.outputs.name) }}"
              tids: "${{ format('{0},{1},{2},{3}', steps.a.outputs.tid, steps.b.outputs.tid, steps.c.outputs.tid, steps.d.outputs.tid) }}"
            """)
        let result = try h.orchestrate(["run", file, "--json", "--plugin-path", probe])
        #expect(result.status == 0, "\(result.stderr)")
        let runID = try #require(try h.runIDs().first)
        let outputs = try h.status(runID)["outputs"]
        // Each quick step ran on the thread of the run's loop, not on an attempt thread
        // ("steps of RUN"); the slow one kept the thread the loop lent it, so the steps after it
        // ran on the thread the loop went on on.
        #expect(outputs?["names"]?.stringValue == "run loops,run loops,run loops,run loops", "\(String(describing: outputs))")
        let tids = (outputs?["tids"]?.stringValue ?? "").split(separator: ",")
        #expect(tids.count == 4 && tids[0] == tids[1] && tids[2] == tids[3] && tids[1] != tids[2], "\(tids)")
        // The journal's order: each step's start, then its end, step after step.
        let expected = ["a", "b", "slow", "c", "d"].flatMap { ["step.started \($0)", "step.succeeded \($0)"] }
        #expect(Self.stepEvents(result) == expected, "\(Self.stepEvents(result))")
    }

    @Test func aLoneStepIsTimedOutWithinItsLimit() throws {
        let file = h.workflow("""
            version: 1
            name: lone
            steps:
              slow: { uses: test.sleep, with: { ms: 20000 }, timeout: 300ms, retry: { max_attempts: 1 } }
            """)
        let started = Date()
        let result = try h.orchestrate(["run", file, "--json"])
        let took = Date().timeIntervalSince(started)
        #expect(result.status == 1, "\(result.stderr)")
        #expect(took < 5, "a 300 ms timeout took \(took) s")
        let failed = Harness.events(result).ofType("step.failed").first
        #expect(failed?["data"]?["kind"]?.stringValue == "timeout", "\(result.stdout)")
    }

    /// A plugin that ignores its cancellation keeps the thread it runs on forever: the loop
    /// must not be waiting on that thread to abandon it and end the run.
    @Test func aLoneStepThatIgnoresItsCancellationIsAbandonedAndTheRunEnds() throws {
        let dir = h.dir.file("broken-plugins")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        _ = try CCompiler.buildFixture("broken", into: dir)
        let file = h.workflow("""
            version: 1
            name: deaf
            steps:
              hang: { uses: broken.hang, timeout: 300ms, retry: { max_attempts: 1 } }
            """)
        let child = try SpawnedChild([TestPaths.orchestrate.path, "run", file, "--json"] + h.baseArguments + ["--plugin-path", dir.path],
                                     stdout: h.path("stdout"), stderr: h.path("stderr"),
                                     environment: ["ORCHESTRATE_TIMEOUT_GRACE_SECONDS": "1"])
        let started = Date()
        let status = child.wait(timeout: 30)
        #expect(status == 1, "exit status \(String(describing: status)) after \(Date().timeIntervalSince(started)) s: \(h.read("stderr"))")
        let failed = h.lines("stdout").compactMap { try? JSONValue(parsing: $0) }.ofType("step.failed").first
        #expect(failed?["data"]?["code"]?.stringValue == "abandoned", "\(h.read("stdout"))")
    }
}
