import Foundation
import OrchestrateJSON
import OrchestrateTestSupport
import Testing

/// `--max-rate`: a run's cap holds across all its transfers together (in process and through
/// the plugin runner), is kept for `resume` (which may replace or remove it), and `serve`'s cap
/// holds across all its runs. The transfers are `test.metered` steps (the C test plugin), which
/// account their bytes through the `orchestrate.bandwidth.v1` extension as a network step does.
///
/// Durations are checked only from below (noise can only make a run slower): under a cap of
/// R bytes/s with a burst of R/4, moving B bytes cannot take less than (B - R/4) / R seconds.
@Suite struct BandwidthCapTests {
    let h = Harness()

    func meteredWorkflow(steps: [String: Int], isolation: String? = nil, name: String = "metered.yaml") -> String {
        let body = steps.sorted { $0.key < $1.key }.map { id, bytes in
            "  \(id): { uses: test.metered, with: { bytes: \(bytes) }\(isolation.map { ", isolation: \($0)" } ?? "") }"
        }.joined(separator: "\n")
        return h.workflow("version: 1\nname: metered\nsteps:\n" + body + "\n", name: name)
    }

    @Test func aRunsCapHoldsAcrossItsParallelTransfers() throws {
        // Two steps of 1 MiB at once under 1 MiB/s: together at least (2 - 0.25) s.
        let file = meteredWorkflow(steps: ["a": 1 << 20, "b": 1 << 20])
        let started = Date()
        let result = try h.orchestrate(["run", file, "--max-rate", "1M", "--json"])
        let elapsed = Date().timeIntervalSince(started)
        #expect(result.status == 0, "\(result.stderr)")
        #expect(elapsed >= 1.7, "2 MiB under a 1 MiB/s cap took only \(elapsed) s")
        let runID = try #require(try h.runIDs().first)
        let status = try h.status(runID)
        #expect(status["max_rate"]?.intValue == 1 << 20)
        for step in status["steps"]?.arrayValue ?? [] {
            #expect(step["outputs"]?["extension"]?.boolValue == true, "the host offered the extension to \(step["id"]?.stringValue ?? "?")")
        }
        let text = try h.orchestrate(["status", runID]).stdout
        #expect(text.contains("max rate  1.0 MiB/s"), "\(text)")
    }

    @Test func theCapHoldsForIsolatedPlugins() throws {
        // The runner asks the engine over its channel; the same cap applies.
        let file = meteredWorkflow(steps: ["a": 1 << 20, "b": 1 << 20], isolation: "process")
        let started = Date()
        let result = try h.orchestrate(["run", file, "--max-rate", "1M", "--json"])
        let elapsed = Date().timeIntervalSince(started)
        #expect(result.status == 0, "\(result.stderr)")
        #expect(elapsed >= 1.7, "2 MiB under a 1 MiB/s cap took only \(elapsed) s through the runner")
    }

    @Test func resumeKeepsReplacesOrRemovesTheCap() throws {
        // 64 MiB at 64 KiB/s would take 17 minutes: the run is killed, and resumed without a cap.
        let file = meteredWorkflow(steps: ["slow": 64 << 20])
        let process = try h.start(["run", file, "--max-rate", "64K"])
        var runID: String?
        #expect(h.waitFor { runID = try? h.runIDs().first; return runID.flatMap { id in
            (try? h.status(id))?["steps"]?.arrayValue?.first?["status"]?.stringValue == "running" } ?? false })
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
        let id = try #require(runID)
        #expect(try h.status(id)["max_rate"]?.intValue == 64 << 10, "the cap is journaled with the run")

        let started = Date()
        let resumed = try h.orchestrate(["resume", id, "--max-rate", "0"])
        #expect(resumed.status == 0, "\(resumed.stderr)")
        #expect(Date().timeIntervalSince(started) < 60, "without the cap, 64 MiB of metered bytes go at once")
        #expect(try h.status(id)["max_rate"] == nil, "resume --max-rate 0 removed the cap")
    }

    @Test func serveCapsAllItsRunsTogetherAndSubmitCapsOne() throws {
        // Two runs of 1 MiB side by side under one serve capped at 1 MiB/s; the second has its own cap too.
        let file = meteredWorkflow(steps: ["move": 1 << 20])
        let first = try h.orchestrate(["submit", file]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        let second = try h.orchestrate(["submit", file, "--max-rate", "256K"]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(try h.status(second)["max_rate"]?.intValue == 256 << 10)
        let started = Date()
        let worker = try h.start(["serve", "--max-parallel", "2", "--max-rate", "1M"])
        defer {
            if worker.isRunning { kill(worker.processIdentifier, SIGTERM) }
            worker.waitUntilExit()
        }
        var finishedAt: [String: Double] = [:]
        #expect(h.waitFor(60) {
            for id in [first, second] where finishedAt[id] == nil {
                if (try? h.status(id))?["status"]?.stringValue == "succeeded" { finishedAt[id] = Date().timeIntervalSince(started) }
            }
            return finishedAt.count == 2
        })
        // The first run has no cap of its own: only serve's 1 MiB/s (shared with the second
        // run's bytes, after a 256 KiB burst) slows it, to at least about 1 s for its 1 MiB.
        let firstTook = finishedAt[first] ?? 0
        #expect(firstTook >= 0.9, "1 MiB under serve's 1 MiB/s cap took only \(firstTook) s")
        // The second run is also held to its own 256 KiB/s: at least (1 MiB - 64 KiB) / 256 KiB =
        // 3.75 s, which serve's cap alone (both runs done by ~2 s) cannot explain.
        #expect((finishedAt[second] ?? 0) >= 3.5, "the submitted run's own cap held: \(finishedAt[second] ?? 0) s")
    }

    @Test func badRatesAreRefusedWithTheirSyntax() throws {
        let file = meteredWorkflow(steps: ["a": 1])
        for bad in ["fast", "-1M", "10X", "1.5.2M", ""] {
            let result = try h.orchestrate(["run", file, "--max-rate", bad])
            #expect(result.status == 2, "--max-rate \(bad) is refused")
            #expect(result.stderr.contains("--max-rate"), "\(result.stderr)")
        }
        #expect(try h.runIDs().isEmpty, "nothing was journaled for a refused command")
    }
}
