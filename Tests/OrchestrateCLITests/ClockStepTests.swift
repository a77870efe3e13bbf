import Foundation
import OrchestrateTestSupport
import Testing

/// The wall clock stepped back (NTP at boot, an operator's `date -s`): `serve`'s waits are
/// durations on the monotonic clock, so an idle worker still claims a new run at once. With
/// waits for a wall-clock instant (NSCondition.wait(until:)), it stalled for as long as the step.
///
/// Opt-in (`ORCHESTRATE_TEST_CLOCK_STEP=1`, as root): it steps this machine's clock back by two
/// minutes and forward again, which would disturb the timings of tests running beside it, so
/// scripts/test.sh runs it alone after the other passes:
/// `ORCHESTRATE_TEST_CLOCK_STEP=1 swift test --filter ClockStepTests`.
@Suite(.serialized, .enabled(if: ProcessInfo.processInfo.environment["ORCHESTRATE_TEST_CLOCK_STEP"] == "1" && getuid() == 0))
struct ClockStepTests {
    let h = Harness()

    /// Steps CLOCK_REALTIME by `seconds` (negative: back).
    static func stepClock(by seconds: Int) {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        now.tv_sec += seconds
        #expect(clock_settime(CLOCK_REALTIME, &now) == 0, "clock_settime: \(String(cString: strerror(errno)))")
    }

    @Test func anIdleServeClaimsANewRunRightAfterTheClockWentBack() throws {
        let file = h.workflow("version: 1\nname: one\nsteps:\n  a: { uses: test.noop }\n")
        let worker = try h.start(["serve"])
        defer {
            kill(worker.processIdentifier, SIGTERM)
            worker.waitUntilExit()
        }
        // serve up and idle, in its poll wait.
        #expect(try h.orchestrate(["submit", file, "--id", "before"]).status == 0)
        #expect(h.waitFor(20) { (try? h.status("before")["status"]?.stringValue) == "succeeded" })
        Thread.sleep(forTimeInterval: 0.5)

        let stepped = Date()
        Self.stepClock(by: -120)
        var restored = false
        defer { if !restored { Self.stepClock(by: 120) } }
        let submitted = DispatchTime.now()
        #expect(try h.orchestrate(["submit", file, "--id", "after"]).status == 0)
        let claimed = h.waitFor(30) { (try? h.status("after")["status"]?.stringValue) == "succeeded" }
        let seconds = Double(DispatchTime.now().uptimeNanoseconds - submitted.uptimeNanoseconds) / 1e9
        Self.stepClock(by: 120)
        restored = true
        #expect(claimed && seconds < 10, "the run waited \(seconds) s (the clock went back 120 s at \(stepped))")
    }
}
