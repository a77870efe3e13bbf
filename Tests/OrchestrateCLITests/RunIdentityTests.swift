import Foundation
import OrchestrateJSON
import OrchestrateTestSupport
import Testing

/// `run --id NAME` and `submit --id NAME` name a job, as Temporal's workflow ids do: an
/// unfinished run of that id is continued, a succeeded one is not run again without `--rerun`,
/// an id of another job is refused. `run` without an id continues an interrupted run of the
/// same workflow and inputs (`--new` starts another).
@Suite struct RunIdentityTests {
    let h = Harness()

    func appending(_ line: String = "done") -> String {
        h.workflow("""
            version: 1
            name: once
            inputs:
              line: { type: string, default: "\(line)" }
            steps:
              write: { uses: test.append, with: { file: "\(h.path("out"))", line: "${{ inputs.line }}" } }
            """)
    }

    @Test func aSucceededRunOfAnIdIsNotRunAgainUnlessRerunIsAsked() throws {
        let file = appending()
        #expect(try h.orchestrate(["run", file, "--id", "job-1"]).status == 0)
        let again = try h.orchestrate(["run", file, "--id", "job-1"])
        #expect(again.status == 0, "a job done is no failure: \(again.stderr)")
        #expect(again.stderr.contains("run job-1 already succeeded; not run again (--rerun runs it again from the start)"), "\(again.stderr)")
        #expect(h.lines("out") == ["done"], "the step ran again")

        let rerun = try h.orchestrate(["run", file, "--id", "job-1", "--rerun"])
        #expect(rerun.status == 0, "\(rerun.stderr)")
        #expect(rerun.stderr.contains("run job-1 (succeeded) is replaced by a new run of the same id"), "\(rerun.stderr)")
        #expect(h.lines("out") == ["done", "done"])
        #expect(try h.runIDs() == ["job-1"])
        #expect(try h.status("job-1")["status"]?.stringValue == "succeeded")

        #expect(try h.orchestrate(["run", file, "--rerun"]).status == 2, "--rerun without --id")
    }

    @Test func anIdOfAnotherJobIsRefused() throws {
        #expect(try h.orchestrate(["run", appending(), "--id", "job-2"]).status == 0)
        let other = try h.orchestrate(["run", appending(), "--id", "job-2", "--input", "line=other"])
        #expect(other.status == 2)
        #expect(other.stderr.contains("run job-2 exists for another job (workflow once, other inputs)"), "\(other.stderr)")
        #expect(h.lines("out") == ["done"])
    }

    @Test func aFailedRunOfAnIdPointsAtRetry() throws {
        let file = h.workflow("""
            version: 1
            name: breaks
            steps:
              two: { uses: test.fail, with: { kind: permanent, message: boom } }
            """)
        #expect(try h.orchestrate(["run", file, "--id", "job-3"]).status == 1)
        let again = try h.orchestrate(["run", file, "--id", "job-3"])
        #expect(again.status == 1)
        #expect(again.stderr.contains("orchestrate retry job-3"), "\(again.stderr)")
    }

    func checkpointing() -> String {
        h.workflow("""
            version: 1
            name: ticking
            steps:
              first: { uses: test.append, with: { file: "\(h.path("out"))", line: first } }
              ticks: { uses: test.checkpoint, needs: [first], with: { file: "\(h.path("ticks"))", count: 30, delay_ms: 60 } }
            """)
    }

    func killMidway(_ file: String, _ extra: [String]) throws {
        let process = try h.start(["run", file] + extra)
        #expect(h.waitFor { h.lines("ticks").count >= 8 })
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }

    /// The resumed run kept what the killed one did: `first` ran once, the ticks continued from
    /// the checkpoint.
    func expectContinued(_ runID: String) throws {
        #expect(h.lines("out") == ["first"])
        let ticks = h.lines("ticks").compactMap { Int($0) }
        #expect(Set(ticks) == Set(0..<30) && ticks.count <= 31)
        let step = try h.status(runID)["steps"]?.arrayValue?.first { $0["id"]?.stringValue == "ticks" }
        #expect((step?["outputs"]?["resumed_from"]?.intValue ?? 0) >= 7)
    }

    @Test func runWithTheIdOfAKilledRunResumesIt() throws {
        let file = checkpointing()
        try killMidway(file, ["--id", "night-1"])
        let again = try h.orchestrate(["run", file, "--id", "night-1"])
        #expect(again.status == 0, "\(again.stdout)\n\(again.stderr)")
        #expect(again.stderr.contains("resuming run night-1 (interrupted), the unfinished run of id night-1"), "\(again.stderr)")
        #expect(try h.runIDs() == ["night-1"])
        try expectContinued("night-1")
    }

    @Test func runWithoutAnIdContinuesTheInterruptedRunOfTheSameJob() throws {
        let file = checkpointing()
        try killMidway(file, [])
        let killed = try #require(try h.runIDs().first)
        let again = try h.orchestrate(["run", file])
        #expect(again.status == 0, "\(again.stdout)\n\(again.stderr)")
        #expect(again.stderr.contains("resuming run \(killed) (interrupted)"), "\(again.stderr)")
        #expect(try h.runIDs() == [killed])
        try expectContinued(killed)
    }

    @Test func newStartsAnotherRunBesideTheInterruptedOne() throws {
        let file = checkpointing()
        try killMidway(file, [])
        let killed = try #require(try h.runIDs().first)
        let fresh = try h.orchestrate(["run", file, "--new"])
        #expect(fresh.status == 0, "\(fresh.stderr)")
        #expect(!fresh.stderr.contains("resuming"))
        #expect(try h.runIDs().count == 2)
        #expect(try h.status(killed)["status"]?.stringValue == "interrupted")
    }

    @Test func submitWithTheIdOfAnInterruptedRunQueuesItToContinue() throws {
        let file = checkpointing()
        try killMidway(file, ["--id", "night-2"])
        let submitted = try h.orchestrate(["submit", file, "--id", "night-2"])
        #expect(submitted.status == 0, "\(submitted.stderr)")
        #expect(submitted.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "night-2")
        #expect(submitted.stderr.contains("queued to continue where it stopped"), "\(submitted.stderr)")
        #expect(try h.status("night-2")["status"]?.stringValue == "queued")
        #expect(try h.runIDs() == ["night-2"])

        let done = appending()
        #expect(try h.orchestrate(["run", done, "--id", "done-1"]).status == 0)
        let twice = try h.orchestrate(["submit", done, "--id", "done-1"])
        #expect(twice.status == 0)
        #expect(twice.stderr.contains("already succeeded; not run again"))
        #expect(try h.status("done-1")["status"]?.stringValue == "succeeded")
    }
}
