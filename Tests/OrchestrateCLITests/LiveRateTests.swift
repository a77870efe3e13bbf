import Foundation
import OrchestrateJSON
import OrchestrateTestSupport
import Testing

/// `--max-rate` timetables through the real binary, and `orchestrate queue rate` changing the
/// cap of a running `serve` for the transfer in flight (`test.metered` steps account their bytes
/// through the bandwidth extension, as a network step does).
@Suite struct LiveRateTests {
    let h = Harness()

    func metered(_ bytes: Int) -> String {
        h.workflow("version: 1\nname: metered\nsteps:\n  move: { uses: test.metered, with: { bytes: \(bytes) } }\n")
    }

    @Test func aTimetableCapsARunAndIsJournaledWithIt() throws {
        // Every day from 00:00 at 1 MiB/s: a timetable whose rate is 1 MiB/s whatever the hour.
        let file = metered(2 << 20)
        let started = Date()
        let result = try h.orchestrate(["run", file, "--max-rate", "00:00,1M", "--json"])
        let elapsed = Date().timeIntervalSince(started)
        #expect(result.status == 0, "\(result.stderr)")
        #expect(elapsed >= 1.7, "2 MiB under a 1 MiB/s timetable took only \(elapsed) s")
        let id = try #require(try h.runIDs().first)
        let status = try h.status(id)
        #expect(status["max_rate_timetable"]?.stringValue == "00:00,1M")
        #expect(status["max_rate"] == nil)
        #expect(try h.orchestrate(["status", id]).stdout.contains("max rate  00:00,1M"))

        let queued = try h.orchestrate(["submit", file, "--max-rate", "Mon-Fri 08:00,10M 19:00,off"])
        let queuedID = queued.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(try h.status(queuedID)["max_rate_timetable"]?.stringValue == "Mon-Fri 08:00,10M 19:00,off")
    }

    @Test func aBadTimetableIsRefusedNamingTheEntry() throws {
        let file = metered(1)
        let result = try h.orchestrate(["run", file, "--max-rate", "Mon-Fri 08:00,10X 19:00,off"])
        #expect(result.status == 2)
        #expect(result.stderr.contains("--max-rate") && result.stderr.contains("'08:00,10X': '10X' is not a rate"), "\(result.stderr)")
        let queue = try h.orchestrate(["queue", "rate", "08:00,512K:1M"])
        #expect(queue.status == 2)
        #expect(queue.stderr.contains("upload:download"), "\(queue.stderr)")
        #expect(try h.orchestrate(["queue", "stop", "20M"]).status == 2, "only `queue rate` takes a value")
        #expect(try h.runIDs().isEmpty)
    }

    /// serve starts at 64 KiB/s with a 64 MiB transfer (17 minutes at that rate); `queue rate
    /// 16M` reaches it through the store while it runs: it ends within seconds, yet no sooner
    /// than 16 MiB/s allows (so the new cap holds, not just "no cap"). `queue rate reset` then
    /// gives serve its own --max-rate back.
    @Test func queueRateChangesTheCapOfARunningServe() throws {
        let id = try h.orchestrate(["submit", metered(64 << 20)]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        let worker = try h.start(["serve", "--max-rate", "64K", "--json"])
        defer {
            if worker.isRunning { kill(worker.processIdentifier, SIGTERM) }
            worker.waitUntilExit()
        }
        #expect(h.waitFor { (try? h.status(id))?["steps"]?.arrayValue?.first?["status"]?.stringValue == "running" })
        Thread.sleep(forTimeInterval: 0.5)
        #expect((try? h.status(id))?["status"]?.stringValue == "running", "still crawling at 64 KiB/s")

        let changed = Date()
        let set = try h.orchestrate(["queue", "rate", "16M"])
        #expect(set.status == 0, "\(set.stderr)")
        #expect(h.waitFor(60) { (try? h.status(id))?["status"]?.stringValue == "succeeded" })
        let took = Date().timeIntervalSince(changed)
        #expect(took >= 3.5, "64 MiB under 16 MiB/s cannot take less than 3.75 s: \(took) s")
        #expect(took < 30, "the running transfer took the new cap: \(took) s")

        #expect(try h.orchestrate(["queue", "rate"]).stdout.contains("queue rate 16M"))
        #expect(try h.orchestrate(["queue", "rate", "reset"]).status == 0)
        #expect(try h.orchestrate(["queue", "rate"]).stdout.contains("each serve follows its own --max-rate"))
        // The worker journals each cap it applies: 16M from the store, then its own 64K again.
        #expect(h.waitFor(10) {
            let changes = (try? h.orchestrate(["events", "--json"]).stdout) ?? ""
            return changes.contains("\"max_rate\":\"16M\"") && changes.contains("\"max_rate\":\"64K\"")
        }, "queue.rate_changed events for 16M and then 64K")
    }
}
