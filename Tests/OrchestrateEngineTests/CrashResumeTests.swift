import Foundation
import OrchestrateJSON
import OrchestrateTestSupport
import Testing

/// `kill -9` at any moment, then `orchestrate resume`: finished steps are not run again, the
/// interrupted step continues from its checkpoint, the run completes.
@Suite(.serialized) struct CrashResumeTests {
    let h = Harness()

    func fiveSteps() -> String {
        let out = h.path("out")
        return h.workflow("""
            version: 1
            name: five-steps
            steps:
              s1: { uses: test.append, with: { file: "\(out)", line: s1 } }
              s2: { uses: test.append, needs: [s1], with: { file: "\(out)", line: s2 } }
              s3: { uses: test.checkpoint, needs: [s2], with: { file: "\(h.path("ticks"))", count: 30, delay_ms: 60 } }
              s4: { uses: test.append, needs: [s3], with: { file: "\(out)", line: s4 } }
              s5: { uses: test.append, needs: [s4], with: { file: "\(out)", line: s5 } }
            """)
    }

    @Test func killedMidRunThenResumedRunsEachFinishedStepOnce() throws {
        let file = fiveSteps()
        let process = try h.start(["run", file])
        // Wait until step 3 is well into its work, then kill -9.
        #expect(h.waitFor { h.lines("ticks").count >= 8 })
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
        #expect(h.lines("out") == ["s1", "s2"])

        let runID = try #require(try h.runIDs().first)
        #expect(try h.status(runID)["status"]?.stringValue == "interrupted")

        let resumed = try h.orchestrate(["resume", runID])
        #expect(resumed.status == 0, "\(resumed.stdout)\n\(resumed.stderr)")
        #expect(h.lines("out") == ["s1", "s2", "s4", "s5"])
        // Every tick 0..<30 is there; at most the one in flight at the kill was repeated.
        let ticks = h.lines("ticks").compactMap { Int($0) }
        #expect(Set(ticks) == Set(0..<30))
        #expect(ticks.count <= 31)
        let status = try h.status(runID)
        #expect(status["status"]?.stringValue == "succeeded")
        let s3 = status["steps"]?.arrayValue?.first { $0["id"]?.stringValue == "s3" }
        let resumedFrom = s3?["outputs"]?["resumed_from"]?.intValue ?? 0
        #expect(resumedFrom >= 7, "the checkpoint was not handed back: resumed_from \(resumedFrom)")
        #expect(s3?["attempt"]?.intValue == 2)
    }

    @Test func aRunningRunCannotBeResumedTwice() throws {
        let file = h.workflow("""
            version: 1
            name: long
            steps:
              wait: { uses: test.sleep, with: { ms: 4000 } }
            """)
        let process = try h.start(["run", file])
        defer { kill(process.processIdentifier, SIGKILL); process.waitUntilExit() }
        #expect(h.waitFor { ((try? h.runIDs()) ?? []).count == 1 })
        let runID = try #require(try h.runIDs().first)
        #expect(h.waitFor { (try? h.status(runID)["status"]?.stringValue) == "running" })
        let second = try h.orchestrate(["resume", runID])
        #expect(second.status == 1)
        #expect(second.stderr.contains("is being executed by process \(process.processIdentifier)"))
    }

    @Test func aFinishedRunIsNotResumed() throws {
        let file = h.workflow("""
            version: 1
            name: quick
            steps:
              one: { uses: test.noop }
            """)
        #expect(try h.orchestrate(["run", file]).status == 0)
        let runID = try #require(try h.runIDs().first)
        let again = try h.orchestrate(["resume", runID])
        #expect(again.status == 0)
        #expect(again.stderr.contains("already finished: succeeded"))
    }
}

/// Fencing: a process whose run another process took over (its lease had expired) stops at once
/// and writes nothing more: no compensation on the new owner's run, no event, no status change.
@Suite struct OwnershipFencingTests {
    let h = Harness()

    @Test func aProcessWhoseRunWasTakenOverStopsWithoutWriting() throws {
        let undo = h.path("undo")
        let file = h.workflow("""
            version: 1
            name: fenced
            steps:
              first:
                uses: test.append
                with: { file: "\(h.path("out"))", line: first }
                compensate: { uses: test.append, with: { file: "\(undo)", line: undo } }
              long: { uses: test.sleep, needs: [first], with: { ms: 60000 } }
            """)
        let process = try h.start(["run", file])
        var runID: String?
        #expect(h.waitFor {
            runID = try? h.runIDs().first
            return runID.flatMap { id in
                (try? h.status(id))?["steps"]?.arrayValue?.contains {
                    $0["id"]?.stringValue == "long" && $0["status"]?.stringValue == "running"
                }
            } ?? false
        })
        let id = try #require(runID)
        func sql(_ statement: String) throws -> String { try h.storeSQL(statement) }
        // What another host does when it takes over a run whose lease expired.
        let lastSeq = try sql("SELECT max(seq) FROM events")
        _ = try sql("UPDATE runs SET \(h.ownerNodeColumn) = 'elsewhere', owner_pid = 1, owner_start = 1, lease_until = 9e12 WHERE id = '\(id)'")
        #expect(h.waitFor(15) { !process.isRunning }, "the ousted process stopped (its heartbeat beats every 2 s)")
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
        #expect(process.terminationStatus == 1)
        #expect(try sql("SELECT max(seq) FROM events") == lastSeq, "no event was written after the takeover")
        #expect(try sql("SELECT status || ' ' || \(h.ownerNodeColumn) FROM runs WHERE id = '\(id)'") == "running elsewhere")
        #expect(try sql("SELECT status FROM steps WHERE run_id = '\(id)' AND id = 'long'") == "running")
        #expect(!FileManager.default.fileExists(atPath: undo), "no compensation ran on a run this process no longer owns")
    }
}
