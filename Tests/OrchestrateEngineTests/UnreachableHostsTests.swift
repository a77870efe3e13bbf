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
        hosts.hold("a", on: server, reason: "refused", holdTimeout: 3600, now: 100)
        hosts.hold("b", on: server, reason: "refused", holdTimeout: 3600, now: 100.5)  // the host is being probed already: same schedule
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
        hosts.hold("a", on: server, reason: "refused", holdTimeout: 3600, now: 0)
        var now = 1.0
        var delays: [Double] = []
        for _ in 0..<7 {
            let due = hosts.startDueProbes(now: now)
            let released = hosts.probed(server, failure: "refused", now: now)
            #expect(due == [server] && released.isEmpty)
            let next = try #require(hosts.nextProbeDue)
            delays.append(next - now)
            now = next
        }
        #expect(delays == [2, 4, 8, 16, 30, 30, 30])
    }

    @Test func anAnswerReleasesEveryStepHeldOnThatHostAndEndsItsProbing() {
        var hosts = UnreachableHosts()
        hosts.hold("a", on: server, reason: "refused", holdTimeout: 3600, now: 0)
        hosts.hold("b", on: server, reason: "refused", holdTimeout: 3600, now: 0)
        hosts.hold("c", on: other, reason: "refused", holdTimeout: 3600, now: 5)
        _ = hosts.startDueProbes(now: 1)
        let released = hosts.probed(server, failure: nil, now: 1.2)
        #expect(released == ["a", "b"])
        #expect(hosts.nextProbeDue == 6, "the other host is still probed")
        // A second answer for the same host finds nothing held.
        let again = hosts.probed(server, failure: nil, now: 1.3)
        let due = hosts.startDueProbes(now: 1000)
        #expect(again.isEmpty && due == [other])
    }

    @Test func releaseAllReturnsEveryHeldStepAndALateAnswerReleasesNothing() {
        var hosts = UnreachableHosts()
        hosts.hold("a", on: server, reason: "refused", holdTimeout: 3600, now: 0)
        hosts.hold("c", on: other, reason: "refused", holdTimeout: 3600, now: 0)
        _ = hosts.startDueProbes(now: 1)
        let all = hosts.releaseAll()
        #expect(Set(all) == ["a", "c"])
        #expect(hosts.nextProbeDue == nil)
        let late = hosts.probed(server, failure: nil, now: 2)
        let due = hosts.startDueProbes(now: 1000)
        #expect(late.isEmpty && due.isEmpty)
    }

    @Test func aHeldStepGivesUpAtItsHoldTimeoutAndItsHostIsNoLongerProbedWhenNothingWaits() throws {
        var hosts = UnreachableHosts(reportInterval: 60)
        hosts.hold("a", on: server, reason: "connection refused", holdTimeout: 5, now: 0)
        hosts.hold("b", on: server, reason: "connection refused", holdTimeout: 3600, now: 2)
        #expect(hosts.nextDue == 1, "the first probe comes first")
        #expect(hosts.expired(now: 4.9).isEmpty)
        let gone = hosts.expired(now: 5)
        #expect(gone.map(\.instanceID) == ["a"])
        #expect(gone.first?.givesUpAt == 5 && gone.first?.reason == "connection refused")
        #expect(hosts.heldCount == 1 && hosts.waiting("a") == nil)
        #expect(hosts.nextProbeDue != nil, "b still waits on the host: it is still probed")
        _ = hosts.expired(now: 3602)
        #expect(hosts.heldCount == 0 && hosts.nextProbeDue == nil && hosts.nextDue == nil)
    }

    @Test func aHeldStepReportsEveryIntervalWithTheLatestProbesReasonAndNextProbe() throws {
        var hosts = UnreachableHosts(reportInterval: 10)
        hosts.hold("a", on: server, reason: "cannot connect: Connection refused", holdTimeout: 300, now: 0)
        #expect(hosts.dueReports(now: 9.9).isEmpty)
        _ = hosts.startDueProbes(now: 1)
        _ = hosts.probed(server, failure: "files.example does not resolve", now: 1.5)
        let first = try #require(hosts.dueReports(now: 10).first)
        #expect(first.reason == "files.example does not resolve" && first.nextProbe == 3.5 && first.givesUpAt == 300)
        #expect(hosts.dueReports(now: 19.9).isEmpty, "not again before the interval")
        #expect(hosts.dueReports(now: 20).map(\.instanceID) == ["a"])
        #expect(try #require(hosts.nextDue) <= 3.5)
    }
}
