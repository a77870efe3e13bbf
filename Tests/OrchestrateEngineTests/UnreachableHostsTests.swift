@testable import OrchestrateEngine
import OrchestrateJSON
import Testing

/// The bookkeeping of steps held on hosts that do not answer (`UnreachableHosts`), on its own:
/// when probes are due, their backoff, and what an answer releases. The end-to-end behaviour
/// (a step held while its server is down) is NetworkAwarenessTests'.
@Suite struct UnreachableHostsTests {
    let server = Endpoint(inputs: ["host": "files.example", "port": 22])!
    let other = Endpoint(inputs: ["url": "https://api.example/upload"])!

    @Test func theFirstProbeIsDueASecondAfterTheFirstHoldAndIsStartedOnce() {
        var hosts = UnreachableHosts()
        hosts.hold("a", on: server, now: 100)
        hosts.hold("b", on: server, now: 100.5)  // the host is being probed already: same schedule
        #expect(hosts.nextProbeDue == 101)
        let early = hosts.startDueProbes(now: 100.9)
        let due = hosts.startDueProbes(now: 101)
        // Under way: neither due again nor counted for the loop's sleep until its answer.
        let again = hosts.startDueProbes(now: 200)
        #expect(early.isEmpty && due == [server] && again.isEmpty)
        #expect(hosts.nextProbeDue == nil)
    }

    @Test func noAnswerDoublesTheDelayUpToThirtySeconds() throws {
        var hosts = UnreachableHosts()
        hosts.hold("a", on: server, now: 0)
        var now = 1.0
        var delays: [Double] = []
        for _ in 0..<7 {
            let due = hosts.startDueProbes(now: now)
            let released = hosts.probed(server, answers: false, now: now)
            #expect(due == [server] && released.isEmpty)
            let next = try #require(hosts.nextProbeDue)
            delays.append(next - now)
            now = next
        }
        #expect(delays == [2, 4, 8, 16, 30, 30, 30])
    }

    @Test func anAnswerReleasesEveryStepHeldOnThatHostAndEndsItsProbing() {
        var hosts = UnreachableHosts()
        hosts.hold("a", on: server, now: 0)
        hosts.hold("b", on: server, now: 0)
        hosts.hold("c", on: other, now: 5)
        _ = hosts.startDueProbes(now: 1)
        let released = hosts.probed(server, answers: true, now: 1.2)
        #expect(released == ["a", "b"])
        #expect(hosts.nextProbeDue == 6, "the other host is still probed")
        // A second answer for the same host finds nothing held.
        let again = hosts.probed(server, answers: true, now: 1.3)
        let due = hosts.startDueProbes(now: 1000)
        #expect(again.isEmpty && due == [other])
    }

    @Test func releaseAllReturnsEveryHeldStepAndALateAnswerReleasesNothing() {
        var hosts = UnreachableHosts()
        hosts.hold("a", on: server, now: 0)
        hosts.hold("c", on: other, now: 0)
        _ = hosts.startDueProbes(now: 1)
        let all = hosts.releaseAll()
        #expect(Set(all) == ["a", "c"])
        #expect(hosts.nextProbeDue == nil)
        let late = hosts.probed(server, answers: true, now: 2)
        let due = hosts.startDueProbes(now: 1000)
        #expect(late.isEmpty && due.isEmpty)
    }
}
