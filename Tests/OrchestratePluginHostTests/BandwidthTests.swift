// The bandwidth caps behind `--max-rate`: the token bucket's arithmetic on a fake clock, and the
// `orchestrate.bandwidth.v1` extension as a C plugin sees it (bytes accounted, a cancellable wait).
import Foundation
import OrchestrateJSON
import OrchestratePluginHost
import OrchestrateTestSupport
import OrchestrateTokenBucket
import Testing

/// A clock the test moves by hand.
final class FakeClock: @unchecked Sendable {
    private let lock = NSLock()
    private var now: Int64 = 1_000_000_000
    func read() -> Int64 { lock.withLock { now } }
    func advance(nanoseconds: Int64) { lock.withLock { now += nanoseconds } }
}

/// Records what a step asked for, and answers a fixed wait.
final class RecordingAccount: BandwidthAccount, @unchecked Sendable {
    private let lock = NSLock()
    private var requests: [Int64] = []
    let wait: Int64
    init(wait: Int64 = 0) { self.wait = wait }
    func reserve(_ bytes: Int64) -> Int64 {
        lock.withLock { requests.append(bytes) }
        return wait
    }
    var asked: [Int64] { lock.withLock { requests } }
}

@Suite struct BandwidthTests {
    @Test func aFullBucketLetsTheBurstGoThenChargesTheRate() {
        let clock = FakeClock()
        let bucket = TokenBucket(bytesPerSecond: 1 << 20, clock: clock.read)
        #expect(bucket.burst == 256 << 10)
        #expect(bucket.reserve(256 << 10) == 0, "the burst goes at once")
        #expect(bucket.reserve(512 << 10) == 500_000_000, "then 512 KiB at 1 MiB/s is half a second")
        clock.advance(nanoseconds: 500_000_000)
        #expect(bucket.reserve(1) > 0, "the debt was only just paid: one more byte waits")
        clock.advance(nanoseconds: 10_000_000_000)
        #expect(bucket.reserve(256 << 10) == 0, "idle time refills up to the burst")
        #expect(bucket.reserve(1 << 10) > 0, "and no further")
    }

    @Test func theLongRunRateIsExactWhateverTheChunkSizes() {
        let clock = FakeClock()
        let rate: Int64 = 3_000_000
        let bucket = TokenBucket(bytesPerSecond: rate, clock: clock.read)
        var generator = SystemRandomNumberGenerator()
        var total: Int64 = 0
        let start = clock.read()
        while total < 300_000_000 {
            let chunk = Int64.random(in: 1...(4 << 20), using: &generator)
            total += chunk
            clock.advance(nanoseconds: bucket.reserve(chunk))
        }
        let seconds = Double(clock.read() - start) / 1e9
        let expected = Double(total - bucket.burst) / Double(rate)
        #expect(abs(seconds - expected) < 0.01, "moved \(total) bytes in \(seconds) s, expected \(expected) s")
    }

    @Test func severalCapsWaitForTheStrictest() throws {
        let clock = FakeClock()
        let fast = TokenBucket(bytesPerSecond: 10 << 20, clock: clock.read)
        let slow = TokenBucket(bytesPerSecond: 1 << 20, clock: clock.read)
        let caps = try #require(BandwidthCaps([fast, nil, slow]))
        #expect(caps.buckets.count == 2)
        _ = caps.reserve(256 << 10)
        #expect(caps.reserve(1 << 20) == 1_000_000_000, "the 1 MiB/s cap decides")
        #expect(BandwidthCaps([nil, nil]) == nil, "no cap at all: nothing to account")
    }

    @Test func aCPluginAccountsEveryByteThroughTheExtension() async throws {
        let account = RecordingAccount()
        let result = try await runFixture("test.metered", ["bytes": 1_000_000, "chunk": 65_536]) { $0.bandwidth = account }
        let outputs = try #require(result.outputs)
        #expect(outputs["extension"] == true)
        #expect(account.asked.reduce(0, +) == 1_000_000)
        #expect(account.asked.count == 16, "one request per chunk: \(account.asked.count)")
    }

    @Test func withoutACapTheExtensionCostsNothing() async throws {
        let result = try await runFixture("test.metered", ["bytes": .int(1 << 30), "chunk": 4096])
        #expect(result.outputs?["extension"] == true, "the host offers the extension even without a cap")
        #expect(result.outputs?["bytes"] == JSONValue.int(1 << 30))
    }

    @Test func aWaitEndsAtCancellation() async throws {
        // Every chunk would wait a minute; the step must stop within a second of cancel.
        let account = RecordingAccount(wait: 60_000_000_000)
        let invocation = StepInvocation(stepType: try Fixtures.step("test.metered", in: "teststeps"),
                                        request: { var r = request(["bytes": .int(1 << 20)]); r.bandwidth = account; return r }(),
                                        delegate: RecordingDelegate())
        invocation.cancel(.cancelled, after: .milliseconds(200))
        // Timed on the thread that ran the call: the test's own task may wait for a busy pool.
        let timed = await invocation.runTimed()
        let result = timed.result
        #expect(timed.took < .seconds(5), "a 60 s wait ended at cancellation, not after \(timed.took)")
        #expect(result.failure?.kind == .cancelled)
        #expect(account.asked.count == 1)
    }
}
