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
        #expect(resumed.stdout.contains("(5 succeeded)"), "the summary counts the steps finished before the kill: \(resumed.stdout)")
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

    /// A fan-out's items are journaled when they start: one not started at the kill has no row
    /// of its own, `status` lists it as pending (from its fan-out's row), and the resume runs it.
    @Test func aFanOutKilledMidWayResumesItsUnstartedItems() throws {
        let runID = try killFanOutOfCheckpointSteps(secret: nil)
        #expect(try h.storeSQL("SELECT count(*) FROM steps WHERE run_id = '\(runID)' AND kind = 'item'") == "1")
        let steps = try h.status(runID)["steps"]?.arrayValue ?? []
        let second = steps.first { $0["id"]?.stringValue == "each[1]" }
        #expect(second?["status"]?.stringValue == "pending" && second?["kind"]?.stringValue == "item")
        try resumeFanOutOfCheckpointSteps(runID, secret: nil)
    }

    /// When a fan-out's list holds a secret's value, the journal holds it masked (the fan-out's
    /// row, and an item's when it starts), yet an item resumed after a kill gets its real
    /// element, the list being evaluated again: here the file it writes is named by the secret,
    /// not `***`. `item-0` was running at the kill (it continues from its checkpoint, its own
    /// row masked); `item-1` had not started.
    @Test(arguments: ["item-0", "item-1"])
    func aFanOutWhoseListHoldsASecretResumesItsItemsWithTheirRealElements(secretItem: String) throws {
        let secret = h.path(secretItem)
        let runID = try killFanOutOfCheckpointSteps(secret: secret)
        #expect(try h.storeSQL("SELECT count(*) FROM steps WHERE run_id = '\(runID)' AND kind = 'item'") == "1")
        let masked = try h.storeSQL("SELECT item_json FROM steps WHERE run_id = '\(runID)' AND id IN ('each', 'each[0]')")
        #expect(masked.contains("***") && !masked.contains(secret), "\(masked)")
        try resumeFanOutOfCheckpointSteps(runID, secret: secret)
        #expect(try h.storeSQL("SELECT count(*) FROM steps WHERE run_id = '\(runID)' AND kind = 'item'") == "3")
        #expect(try h.storeSQL("SELECT count(*) FROM steps WHERE item_json LIKE '%\(secret)%'") == "0",
                "an item's row holds the secret")
    }

    /// If the secret has another value when the run resumes, the list no longer masks to the one
    /// journaled: the unstarted items fail with a clear error instead of running with `***`.
    @Test func aFanOutWhoseSecretChangedCannotResumeItsMaskedItems() throws {
        let secret = h.path("item-1")
        let runID = try killFanOutOfCheckpointSteps(secret: secret)
        let resumed = try h.orchestrate(["resume", runID], environment: ["ORC_TEST_FILE_TOKEN": "another-value"])
        #expect(resumed.status == 1, "\(resumed.stdout)\n\(resumed.stderr)")
        #expect(resumed.stdout.contains("cannot be resumed"), "\(resumed.stdout)")
        #expect(try h.status(runID)["status"]?.stringValue == "failed")
    }

    /// A fan-out of three `test.checkpoint` items, one at a time, each writing 20 lines to the
    /// file its element names (`item-0`, `item-1`, `item-2`), after a step that resolves the
    /// secret (`item-1`'s path when `secret` is set, a value no item holds otherwise), killed
    /// during the first item.
    private func killFanOutOfCheckpointSteps(secret: String?) throws -> String {
        let file = h.workflow("""
            version: 1
            name: fan-out-killed
            secrets:
              token: { env: ORC_TEST_FILE_TOKEN }
            steps:
              first: { uses: test.noop }
              each:
                needs: [first]
                uses: test.checkpoint
                for_each: ["\(h.path("item-0"))", "\(h.path("item-1"))", "\(h.path("item-2"))"]
                max_parallel: 1
                with: { file: "${{ item }}", count: 20, delay_ms: 50 }
            """)
        let process = try h.start(["run", file], environment: ["ORC_TEST_FILE_TOKEN": secret ?? "not-an-item"])
        #expect(h.waitFor { h.lines("item-0").count >= 3 })
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
        #expect(!FileManager.default.fileExists(atPath: h.path("item-1")), "the second item had not started at the kill")
        return try #require(try h.runIDs().first)
    }

    private func resumeFanOutOfCheckpointSteps(_ runID: String, secret: String?) throws {
        let resumed = try h.orchestrate(["resume", runID], environment: ["ORC_TEST_FILE_TOKEN": secret ?? "not-an-item"])
        #expect(resumed.status == 0, "\(resumed.stdout)\n\(resumed.stderr)")
        #expect(Set(h.lines("item-0").compactMap { Int($0) }) == Set(0 ..< 20))
        #expect(h.lines("item-1").count == 20, "the resumed item wrote to the file its element names")
        #expect(h.lines("item-2").count == 20)
        #expect(try h.status(runID)["status"]?.stringValue == "succeeded")
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
