import Foundation
import OrchestrateJSON
import OrchestrateTestSupport
import Testing

/// Retries follow the workflow's Temporal-style policy, run through the real binary.
@Suite struct RetryTests {
    let h = Harness()

    func flaky(failTimes: Int, kind: String = "retryable", retry: String, retryAfterMs: Int? = nil) -> String {
        let counter = h.path("counter")
        let hint = retryAfterMs.map { ", retry_after_ms: \($0)" } ?? ""
        return h.workflow("""
            version: 1
            name: retries
            steps:
              flaky:
                uses: test.flaky
                with: { counter_file: "\(counter)", fail_times: \(failTimes), kind: \(kind)\(hint) }
                retry: \(retry)
            """)
    }

    @Test func aStepFailingTwiceRunsThreeTimesWithGrowingDelays() throws {
        let file = flaky(failTimes: 2, retry: "{ max_attempts: 5, initial_interval: 200ms, backoff: 2.0, jitter: none }")
        let result = try h.orchestrate(["run", file, "--json"])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(h.read("counter").trimmingCharacters(in: .whitespacesAndNewlines) == "3")
        let events = Harness.events(result)
        let retries = events.ofType("step.retrying")
        #expect(retries.compactMap { $0["data"]?["delay_ms"]?.intValue } == [200, 400])
        #expect(retries.allSatisfy { $0["data"]?["reason"]?.stringValue?.contains("failing on purpose") == true })
        // The waits really happened: attempt 3 started at least 600 ms after attempt 1.
        let starts = events.ofType("step.started").compactMap { $0["time"]?.doubleValue }
        #expect(starts.count == 3)
        #expect(starts[2] - starts[0] >= 0.55)
    }

    /// An `exec` step whose command exits `exitStatus`, counting its runs in a file; `with` adds
    /// inputs (one `key: value` line).
    func failingCommand(exitStatus: Int, retry: String, with extra: String? = nil) -> String {
        h.workflow("""
            version: 1
            name: exec-retries
            steps:
              flaky:
                uses: exec
                with:
                  command: [sh, -c, 'echo run >> "$COUNTER"; exit \(exitStatus)']
                  env: { COUNTER: "\(h.path("counter"))" }\(extra.map { "\n      " + $0 } ?? "")
                retry: \(retry)
            """)
    }

    @Test func aFailingCommandIsRetriedPerThePolicyWithGrowingDelays() throws {
        let file = failingCommand(exitStatus: 1, retry: "{ max_attempts: 3, initial_interval: 200ms, backoff: 2.0, jitter: none }")
        let result = try h.orchestrate(["run", file, "--json"])
        #expect(result.status == 1)
        #expect(h.lines("counter").count == 3)
        let events = Harness.events(result)
        let retries = events.ofType("step.retrying")
        #expect(retries.compactMap { $0["data"]?["delay_ms"]?.intValue } == [200, 400])
        #expect(retries.allSatisfy { $0["data"]?["code"]?.stringValue == "exit_1" })
        let starts = events.ofType("step.started").compactMap { $0["time"]?.doubleValue }
        #expect(starts.count == 3)
        #expect(starts[2] - starts[0] >= 0.55, "the delays were waited")
        let failed = try #require(events.ofType("step.failed").first?["data"])
        #expect(failed["kind"]?.stringValue == "retryable")
        #expect(failed["not_retried"] == .null, "it ran out of attempts; nothing stopped the retries")
        let finished = events.ofType("run.finished").first?["data"]?["error"]?.stringValue
        #expect(finished?.hasPrefix("step 'flaky' failed after 3 attempts: sh exited with status 1") == true, "\(finished ?? "")")
    }

    @Test func aNonRetryableExitCodeRunsOnceAndTheSummarySaysWhy() throws {
        let file = failingCommand(exitStatus: 2, retry: "{ max_attempts: 5, initial_interval: 10ms, non_retryable: [exit_2] }")
        let result = try h.orchestrate(["run", file])
        #expect(result.status == 1)
        #expect(h.lines("counter").count == 1)
        #expect(result.stdout.contains("failed (not retried: retryable error exit_2; exit_2 is listed in non_retryable)"),
                "the step's line: \(result.stdout)")
        // The summary says why it was not retried and points at the step's line for the error.
        #expect(result.stdout.contains("step 'flaky' failed after 1 attempt (not retried: retryable error exit_2; "
            + "exit_2 is listed in non_retryable) (error above)"), "the summary: \(result.stdout)")
    }

    @Test func theDeprecatedRetryableExitCodesStillMakeOtherStatusesPermanent() throws {
        let file = failingCommand(exitStatus: 1, retry: "{ max_attempts: 3, initial_interval: 10ms }",
                                  with: "retryable_exit_codes: [75]")
        let result = try h.orchestrate(["run", file])
        #expect(result.status == 1)
        #expect(h.lines("counter").count == 1)
        #expect(result.stdout.contains("retryable_exit_codes is deprecated"), "\(result.stdout)")
        #expect(result.stdout.contains("not retried: permanent error exit_1; only retryable and timeout errors are retried"))
    }

    @Test func theIdempotencyKeyIsEvaluatedOnceAndKeptAcrossAttempts() throws {
        let file = h.workflow("""
            version: 1
            name: keys
            steps:
              flaky:
                uses: test.flaky
                idempotency_key: "${{ run.id }}/attempt-${{ run.attempt }}"
                with: { counter_file: "\(h.path("counter"))", fail_times: 2 }
                retry: { max_attempts: 3, initial_interval: 10ms }
            """)
        let result = try h.orchestrate(["run", file])
        #expect(result.status == 0, "\(result.stderr)")
        let runID = try #require(try h.runIDs().first)
        let step = try h.status(runID)["steps"]?.arrayValue?.first
        #expect(step?["attempt"]?.intValue == 3)
        #expect(step?["idempotency_key"]?.stringValue == "\(runID)/attempt-1")
    }

    /// `${{ run.attempt }}` in `with` is evaluated again at each attempt: each attempt of this
    /// step counts in a file of its own, so each one fails its first (and only) call.
    @Test func runAttemptInWithIsTheAttemptsNumber() throws {
        let file = h.workflow("""
            version: 1
            name: attempts
            steps:
              flaky:
                uses: test.flaky
                with: { counter_file: "\(h.path("counter"))-${{ run.attempt }}", fail_times: 1 }
                retry: { max_attempts: 3, initial_interval: 10ms }
            """)
        let result = try h.orchestrate(["run", file])
        #expect(result.status == 1, "\(result.stdout)")
        #expect((1 ... 3).map { h.lines("counter-\($0)").count } == [1, 1, 1])
        #expect(!FileManager.default.fileExists(atPath: h.path("counter-4")))
    }

    @Test func aPermanentErrorIsNotRetried() throws {
        let file = flaky(failTimes: 5, kind: "permanent", retry: "{ max_attempts: 5, initial_interval: 10ms }")
        let result = try h.orchestrate(["run", file, "--json"])
        #expect(result.status == 1)
        #expect(h.read("counter").trimmingCharacters(in: .whitespacesAndNewlines) == "1")
        #expect(Harness.events(result).ofType("step.retrying").isEmpty)
        #expect(Harness.events(result).ofType("step.failed").first?["data"]?["kind"]?.stringValue == "permanent")
    }

    @Test func maxAttemptsOneMeansNoRetry() throws {
        let file = flaky(failTimes: 5, retry: "{ max_attempts: 1 }")
        let result = try h.orchestrate(["run", file])
        #expect(result.status == 1)
        #expect(h.read("counter").trimmingCharacters(in: .whitespacesAndNewlines) == "1")
        #expect(result.stdout.contains("failed after 1 attempt"))
    }

    @Test func theStepsRetryAfterHintWinsOverTheComputedDelay() throws {
        let file = flaky(failTimes: 1, retry: "{ max_attempts: 3, initial_interval: 10ms, jitter: none }", retryAfterMs: 700)
        let result = try h.orchestrate(["run", file, "--json"])
        #expect(result.status == 0, "\(result.stderr)")
        let events = Harness.events(result)
        #expect(events.ofType("step.retrying").first?["data"]?["delay_ms"]?.intValue == 700)
        let starts = events.ofType("step.started").compactMap { $0["time"]?.doubleValue }
        #expect(starts.count == 2)
        #expect(starts[1] - starts[0] >= 0.65)
    }

    @Test func nonRetryableKindsStopRetries() throws {
        let file = flaky(failTimes: 5, retry: "{ max_attempts: 5, initial_interval: 10ms, non_retryable: [retryable] }")
        let result = try h.orchestrate(["run", file])
        #expect(result.status == 1)
        #expect(h.read("counter").trimmingCharacters(in: .whitespacesAndNewlines) == "1")
    }

    @Test func aTimeoutCancelsTheAttemptAndIsRetried() throws {
        let file = h.workflow("""
            version: 1
            name: timeouts
            steps:
              slow:
                uses: test.sleep
                with: { ms: 20000 }
                timeout: 300ms
                retry: { max_attempts: 2, initial_interval: 10ms }
            """)
        let started = Date()
        let result = try h.orchestrate(["run", file, "--json"])
        #expect(result.status == 1)
        #expect(Date().timeIntervalSince(started) < 10)
        let events = Harness.events(result)
        #expect(events.ofType("step.retrying").first?["data"]?["kind"]?.stringValue == "timeout")
        #expect(events.ofType("step.failed").first?["data"]?["kind"]?.stringValue == "timeout")
    }
}
