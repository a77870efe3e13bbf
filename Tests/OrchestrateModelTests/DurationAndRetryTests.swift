// Durations as written in workflows, and the retry delay computation.
import OrchestrateModel
import Testing

@Suite("Durations")
struct DurationTests {
    @Test("accepted forms")
    func accepted() {
        #expect(parseDuration("500ms") == .milliseconds(500))
        #expect(parseDuration("30s") == .seconds(30))
        #expect(parseDuration("10m") == .seconds(600))
        #expect(parseDuration("6h") == .seconds(21_600))
        #expect(parseDuration("1h30m") == .seconds(5_400))
        #expect(parseDuration("1m30s250ms") == .milliseconds(90_250))
        #expect(parseDuration("1.5s") == .milliseconds(1_500))
        #expect(parseDuration("2d") == .seconds(172_800))
        #expect(parseDuration("0s") == .zero)
    }

    @Test("refused forms", arguments: ["", "10", "10 minutes", "s", "1x", "30m1h", "-1s", " 1s", "1s ", "1.2.3s", "1hh", "ms"])
    func refused(_ text: String) {
        #expect(parseDuration(text) == nil)
    }

    @Test("written back the way a workflow writes them")
    func workflowText() {
        #expect(Duration.seconds(5_400).workflowText == "1h30m")
        #expect(Duration.milliseconds(1_500).workflowText == "1s500ms")
        #expect(Duration.zero.workflowText == "0s")
    }
}

@Suite("Retry policy")
struct RetryPolicyTests {
    @Test("defaults follow the documented values")
    func defaults() {
        let p = RetryPolicy.default
        #expect(p.maxAttempts == 3)
        #expect(p.initialInterval == .seconds(1))
        #expect(p.backoff == 2.0)
        #expect(p.maxInterval == .seconds(60))
        #expect(p.jitter == .full)
        #expect(p.nonRetryable.isEmpty)
    }

    @Test("delays grow by the backoff factor and stop at the cap")
    func growthAndCap() {
        let p = RetryPolicy(initialInterval: .seconds(1), backoff: 2, maxInterval: .seconds(10), jitter: .none)
        let delays = (1...6).map { p.delay(afterAttempt: $0, unitRandom: 0.3) }
        #expect(delays == [.seconds(1), .seconds(2), .seconds(4), .seconds(8), .seconds(10), .seconds(10)])
        // Huge attempt numbers stay capped instead of overflowing.
        #expect(p.delay(afterAttempt: 10_000, unitRandom: 0) == .seconds(10))
        #expect(p.delay(afterAttempt: Int.max, unitRandom: 0) == .seconds(10))
    }

    @Test("fractional backoff and sub-second intervals")
    func fractional() {
        let p = RetryPolicy(initialInterval: .milliseconds(200), backoff: 1.5, maxInterval: .seconds(60), jitter: .none)
        #expect(p.delay(afterAttempt: 1, unitRandom: 0) == .milliseconds(200))
        #expect(p.delay(afterAttempt: 2, unitRandom: 0) == .milliseconds(300))
        #expect(p.delay(afterAttempt: 3, unitRandom: 0) == .milliseconds(450))
        let constant = RetryPolicy(initialInterval: .seconds(3), backoff: 1, jitter: .none)
        #expect(constant.delay(afterAttempt: 7, unitRandom: 0) == .seconds(3))
    }

    @Test("full jitter scales the capped delay by the random number")
    func fullJitter() {
        let p = RetryPolicy(initialInterval: .seconds(1), backoff: 2, maxInterval: .seconds(10), jitter: .full)
        #expect(p.delay(afterAttempt: 3, unitRandom: 0) == .zero)
        #expect(p.delay(afterAttempt: 3, unitRandom: 0.5) == .seconds(2))
        #expect(p.delay(afterAttempt: 6, unitRandom: 0.5) == .seconds(5))  // half of the cap, not of 32s
        var generator = SystemRandomNumberGenerator()
        for attempt in 1...8 {
            let ceiling = min(Duration.seconds(1) * (1 << (attempt - 1)), .seconds(10))
            for _ in 0..<200 {
                let d = p.delay(afterAttempt: attempt, unitRandom: Double.random(in: 0..<1, using: &generator))
                #expect(d >= .zero && d <= ceiling)
            }
        }
        #expect(p.delay(afterAttempt: 4, unitRandom: 0.999_999) < .seconds(8))
    }

    @Test("non-retryable kinds and codes")
    func nonRetryable() {
        let p = RetryPolicy(nonRetryable: ["invalid-input", "HTTP_404"])
        #expect(p.isNonRetryable(kind: "invalid-input"))
        #expect(p.isNonRetryable(kind: "retryable", code: "HTTP_404"))
        #expect(!p.isNonRetryable(kind: "retryable", code: "HTTP_503"))
    }

    @Test("why an error is not retried, in words")
    func whyNotRetried() {
        let p = RetryPolicy(nonRetryable: ["exit_2", "timeout"])
        #expect(p.whyNotRetried(kind: "retryable", code: "exit_1") == nil)
        #expect(p.whyNotRetried(kind: "retryable", code: "exit_2") == "retryable error exit_2; exit_2 is listed in non_retryable")
        #expect(p.whyNotRetried(kind: "timeout") == "timeout error; timeout is listed in non_retryable")
        #expect(p.whyNotRetried(kind: "permanent", code: "exit_2") == "permanent error exit_2; exit_2 is listed in non_retryable")
        #expect(p.whyNotRetried(kind: "invalid-input", code: "ENOENT")
            == "invalid-input error ENOENT; only retryable and timeout errors are retried")
        #expect(RetryPolicy().whyNotRetried(kind: "timeout") == nil)
    }
}
