// Running steps through StepInvocation: outputs, error kinds, checkpoints, cancellation, items,
// and the host's defences against misbehaving plugins.
import Foundation
import OrchestrateJSON
import OrchestratePluginHost
import OrchestrateTestSupport
import Testing

@Suite struct InvocationTests {
    // MARK: Outputs

    @Test func echoSeesInputsKeyAndAttempt() async throws {
        let inputs: JSONValue = ["text": "héllo \"quoted\"", "n": 42, "list": [1, 2.5, true, nil], "obj": ["a": "b"]]
        let result = try await runFixture("test.echo", inputs) { $0.idempotencyKey = "run-1/create"; $0.attempt = 3 }
        let outputs = try #require(result.outputs)
        #expect(outputs["with"] == inputs)
        #expect(outputs["idempotency_key"] == "run-1/create")
        #expect(outputs["attempt"] == 3)
        let noKey = try #require(try await runFixture("test.echo", [:]).outputs)
        #expect(noKey["idempotency_key"] == .null)
        #expect(noKey["attempt"] == 1)
    }

    @Test func appendWritesTheLine() async throws {
        let dir = TemporaryDirectory()
        let file = dir.file("out.txt").path
        _ = try await runFixture("test.append", ["file": .string(file), "line": "one"])
        let result = try await runFixture("test.append", ["file": .string(file), "line": "two"])
        #expect(result.outputs == ["line": "two"])
        #expect(try String(contentsOfFile: file, encoding: .utf8) == "one\ntwo\n")
    }

    @Test func noopSucceedsWithNoOutputs() async throws {
        #expect(try await runFixture("test.noop", [:]).outputs == [:])
    }

    @Test func invalidJSONOutputIsRefusedAndOutputsCanBeReplaced() async throws {
        let outputs = try #require(try await runFixture("probe.outputs", in: "hostprobe", [:]).outputs)
        #expect(outputs["bad_rc"] == -1)
        #expect(outputs["bad"] == nil)
        #expect(outputs["null_name_rc"] == -1)
        #expect(outputs["replaced"] == ["b": [1, 2.5, "x"]])
    }

    // MARK: Errors

    @Test func flakyFailsThenSucceeds() async throws {
        let dir = TemporaryDirectory()
        let inputs: JSONValue = ["counter_file": .string(dir.file("count").path), "fail_times": 2,
                                 "retry_after_ms": 1500, "code": "http_503"]
        for attempt in 1...2 {
            let failure = try #require(try await runFixture("test.flaky", inputs).failure)
            #expect(failure.kind == .retryable)
            #expect(failure.code == "http_503")
            #expect(failure.message == "failing on purpose (attempt \(attempt))")
            #expect(failure.retryAfter == .milliseconds(1500))
        }
        #expect(try await runFixture("test.flaky", inputs).outputs == ["attempts": 3])
    }

    @Test(arguments: [("retryable", ErrorKind.retryable), ("permanent", .permanent), ("invalid-input", .invalidInput),
                      ("timeout", .timeout), ("cancelled", .cancelled)])
    func errorKindsMap(name: String, kind: ErrorKind) async throws {
        let failure = try #require(try await runFixture("test.fail", ["kind": .string(name), "message": "nope", "code": "c1"]).failure)
        #expect(failure.kind == kind)
        #expect(failure.message == "nope")
        #expect(failure.code == "c1")
        #expect(failure.retryAfter == nil)
    }

    @Test func flakyWithoutHintsHasNoCodeOrRetryAfter() async throws {
        let dir = TemporaryDirectory()
        let failure = try #require(try await runFixture("test.flaky", [
            "counter_file": .string(dir.file("count").path), "fail_times": 1, "kind": "permanent",
        ]).failure)
        #expect(failure.kind == .permanent && failure.code == nil && failure.retryAfter == nil)
    }

    @Test func unknownKindIsPermanent() async throws {
        let failure = try #require(try await runFixture("test.fail", ["kind": 77, "message": "odd kind"]).failure)
        #expect(failure.kind == .permanent)
        #expect(failure.message == "odd kind")
    }

    @Test func failureWithoutErrorIsPermanent() async throws {
        let failure = try #require(try await runFixture("test.fail", ["kind": "none", "message": "-"]).failure)
        #expect(failure.kind == .permanent)
        #expect(failure.message == "step returned failure without reporting an error")
    }

    @Test func unexpectedReturnValueIsAFailure() async throws {
        let failure = try #require(try await runFixture("probe.rc7", in: "hostprobe", [:]).failure)
        #expect(failure.kind == .permanent)
        #expect(failure.message == "step returned 7 (neither ORC_RUN_OK nor ORC_RUN_FAILED) without reporting an error")
    }

    @Test func okAfterSetErrorIsASuccess() async throws {
        #expect(try await runFixture("probe.ok_after_error", in: "hostprobe", [:]).outputs == ["done": true])
    }

    @Test func nonObjectInputsAreRefusedBeforeTheCall() async throws {
        let failure = try #require(try await runFixture("test.noop", [1, 2]).failure)
        #expect(failure.kind == .invalidInput)
    }

    @Test func runTwiceIsRefused() async throws {
        let invocation = StepInvocation(stepType: try Fixtures.step("test.noop", in: "teststeps"), request: request([:]),
                                        delegate: RecordingDelegate())
        #expect(await invocation.runOnThread().outputs == [:])
        #expect(await invocation.runOnThread().failure?.message == "internal error: StepInvocation.run() called twice")
    }

    // MARK: Logs and progress

    @Test func logLinesAreSplitAndLevelsClamped() async throws {
        let delegate = RecordingDelegate()
        _ = try await runFixture("probe.log", in: "hostprobe", [:], delegate: delegate)
        let logs = delegate.logs
        #expect(logs.map(\.1) == ["first", "second", "third", "level nine"])
        #expect(logs.map(\.0) == [.warn, .warn, .warn, .error])
    }

    @Test func callbacksFromManyPluginThreads() async throws {
        let delegate = RecordingDelegate()
        let result = try await runFixture("probe.threads", in: "hostprobe", [:], delegate: delegate)
        #expect(result.outputs == [:])
        #expect(delegate.logs.count == 800)
        #expect(delegate.progressReports.count == 800)
        #expect(delegate.progressReports.allSatisfy { $0.bytesTotal == 200 && $0.filesDone == -1 })
    }

    @Test func callbacksAfterReturnAreIgnored() async throws {
        let delegate = RecordingDelegate()
        let result = try await runFixture("probe.late", in: "hostprobe", [:], delegate: delegate)
        #expect(result.outputs == [:])
        try await Task.sleep(for: .milliseconds(700)) // the plugin's thread calls back at 300 ms
        #expect(delegate.logs.isEmpty)
        #expect(delegate.progressReports.isEmpty)
        #expect(delegate.checkpoints.isEmpty)
    }

    // MARK: Checkpoints

    @Test func checkpointSaveLoadRoundTrip() async throws {
        let delegate = RecordingDelegate()
        let result = try await runFixture("probe.checkpoint", in: "hostprobe", [:], delegate: delegate) {
            $0.checkpoint = Array("zero".utf8)
        }
        let outputs = try #require(result.outputs)
        #expect(outputs["loaded"] == "zero")
        #expect(outputs["save_rc"] == 0)
        #expect(outputs["reloaded"] == "one")
        #expect(outputs["big_rc"] == -1, "over the 1 MiB limit")
        #expect(outputs["after_big"] == "one")
        #expect(outputs["abi_major"] == 1)
        #expect(outputs["api_size"] == 128)
        #expect(outputs["extension_is_null"] == 1)
        #expect(delegate.checkpoints == [Array("one".utf8)])
    }

    @Test func noCheckpointLoadsNull() async throws {
        let outputs = try #require(try await runFixture("probe.checkpoint", in: "hostprobe", [:]).outputs)
        #expect(outputs["loaded"] == .null)
    }

    @Test func checkpointThatIsNotDurableIsNotReloaded() async throws {
        let delegate = RecordingDelegate()
        delegate.checkpointsAreDurable = false
        let outputs = try #require(try await runFixture("probe.checkpoint", in: "hostprobe", [:], delegate: delegate) {
            $0.checkpoint = Array("zero".utf8)
        }.outputs)
        #expect(outputs["save_rc"] == -1)
        #expect(outputs["reloaded"] == "zero")
    }

    @Test func checkpointedStepResumesWhereItStopped() async throws {
        let dir = TemporaryDirectory()
        let file = dir.file("count.txt").path
        let step = try Fixtures.step("test.checkpoint", in: "teststeps")
        let inputs: JSONValue = ["file": .string(file), "count": 6, "delay_ms": 5]

        let delegate = RecordingDelegate()
        let first = StepInvocation(stepType: step, request: request(inputs), delegate: delegate)
        delegate.onCheckpoint = { data in if data == Array("3".utf8) { first.cancel(.shutdown) } }
        let stopped = try #require(await first.runOnThread().failure)
        #expect(stopped.kind == .cancelled)
        #expect(try String(contentsOfFile: file, encoding: .utf8) == "0\n1\n2\n")
        let saved = try #require(delegate.checkpoints.last)
        #expect(saved == Array("3".utf8))

        let second = StepInvocation(stepType: step, request: request(inputs, attempt: 2, checkpoint: saved),
                                    delegate: RecordingDelegate())
        #expect(await second.runOnThread().outputs == ["resumed_from": 3])
        #expect(try String(contentsOfFile: file, encoding: .utf8) == "0\n1\n2\n3\n4\n5\n")
    }

    // MARK: Cancellation

    @Test(arguments: [(CancelReason.cancelled, ErrorKind.cancelled), (.shutdown, .cancelled), (.timeout, .timeout)])
    func cancelWakesASleepingStep(reason: CancelReason, kind: ErrorKind) async throws {
        let invocation = StepInvocation(stepType: try Fixtures.step("test.sleep", in: "teststeps"),
                                        request: request(["ms": 30_000]), delegate: RecordingDelegate())
        invocation.cancel(reason, after: .milliseconds(100))
        let timed = await invocation.runTimed()
        let (result, took) = (timed.result, timed.took)
        let failure = try #require(result.failure)
        #expect(failure.kind == kind)
        #expect(took < .seconds(1))
    }

    @Test func timeoutIsEnforced() async throws {
        let invocation = StepInvocation(stepType: try Fixtures.step("test.sleep", in: "teststeps"),
                                        request: request(["ms": 30_000], timeout: .milliseconds(200)), delegate: RecordingDelegate())
        let timed = await invocation.runTimed()
        let (result, took) = (timed.result, timed.took)
        let failure = try #require(result.failure)
        #expect(failure.kind == .timeout)
        #expect(took >= .milliseconds(200) && took < .seconds(1))
    }

    @Test func sleepWithinTheTimeoutSucceeds() async throws {
        let result = try await runFixture("test.sleep", ["ms": 30]) { $0.timeout = .seconds(5) }
        #expect(result.outputs == ["slept_ms": 30])
    }

    @Test func cancelFDBecomesReadable() async throws {
        let invocation = StepInvocation(stepType: try Fixtures.step("probe.cancel_fd", in: "hostprobe"),
                                        request: request([:]), delegate: RecordingDelegate())
        invocation.cancel(.cancelled, after: .milliseconds(100))
        let timed = await invocation.runTimed()
        let (result, took) = (timed.result, timed.took)
        // The plugin returned OK after noticing: finishing after a cancel is a success.
        #expect(result.outputs == ["woke": 1, "is_cancelled": 1])
        #expect(took < .seconds(1))
    }

    @Test func cancelBeforeRunDoesNotCallThePlugin() async throws {
        let dir = TemporaryDirectory()
        let file = dir.file("never.txt").path
        let invocation = StepInvocation(stepType: try Fixtures.step("test.append", in: "teststeps"),
                                        request: request(["file": .string(file), "line": "x"]), delegate: RecordingDelegate())
        invocation.cancel(.timeout)
        invocation.cancel(.cancelled) // the first reason wins
        let failure = try #require(await invocation.runOnThread().failure)
        #expect(failure.kind == .timeout)
        #expect(!FileManager.default.fileExists(atPath: file))
    }

    @Test(arguments: [
        ("probe.permanent_on_cancel", CancelReason.cancelled, ErrorKind.permanent),
        ("probe.permanent_on_cancel", .timeout, .permanent),
        ("probe.retryable_on_cancel", .cancelled, .cancelled),
        ("probe.retryable_on_cancel", .timeout, .timeout),
        ("probe.retryable_on_cancel", .shutdown, .cancelled),
    ])
    func kindAfterCancellation(step: String, reason: CancelReason, kind: ErrorKind) async throws {
        let invocation = StepInvocation(stepType: try Fixtures.step(step, in: "hostprobe"), request: request([:]),
                                        delegate: RecordingDelegate())
        invocation.cancel(reason, after: .milliseconds(50))
        let failure = try #require(await invocation.runOnThread().failure)
        #expect(failure.kind == kind)
        // The plugin's own code, message and hint are kept.
        #expect(failure.code == "stopped" && failure.message == "stopped after cancel")
        #expect(failure.retryAfter == .milliseconds(2500))
    }

    // MARK: Items

    @Test func itemsAreHandedOutAndReportedDone() async throws {
        let dir = TemporaryDirectory()
        let file = dir.file("items.txt").path
        let delegate = RecordingDelegate()
        delegate.queue([
            .item(id: "1", json: #"{"source":"/a"}"#, checkpoint: nil),
            .item(id: "2", json: #"{"source":"/b"}"#, checkpoint: nil),
            .item(id: "3", json: #"{"source":"/c"}"#, checkpoint: nil),
            .closed,
        ])
        let result = try await runFixture("test.items", ["file": .string(file)], delegate: delegate)
        #expect(result.outputs == ["count": 3])
        #expect(try String(contentsOfFile: file, encoding: .utf8)
            == "{\"source\":\"/a\"}\n{\"source\":\"/b\"}\n{\"source\":\"/c\"}\n")
        #expect(delegate.itemsDone.map(\.0) == ["1", "2", "3"])
        #expect(delegate.itemsDone.allSatisfy { $0.1 == nil })
    }

    @Test func itemsStepStopsWhenCancelled() async throws {
        let dir = TemporaryDirectory()
        let invocation = StepInvocation(stepType: try Fixtures.step("test.items", in: "teststeps"),
                                        request: request(["file": .string(dir.file("i.txt").path)]),
                                        delegate: RecordingDelegate())
        invocation.cancel(.cancelled, after: .milliseconds(150))
        let timed = await invocation.runTimed()
        let (result, took) = (timed.result, timed.took)
        #expect(result.failure?.kind == .cancelled)
        #expect(took < .seconds(1))
    }

    @Test func itemCheckpointProgressAndFailure() async throws {
        let delegate = RecordingDelegate()
        delegate.queue([.item(id: "item-7", json: #"{"path":"/x"}"#, checkpoint: Array("prev".utf8))])
        let outputs = try #require(try await runFixture("probe.item", in: "hostprobe", [:], delegate: delegate).outputs)
        #expect(outputs["id"] == "item-7")
        #expect(outputs["json"] == ["path": "/x"])
        #expect(outputs["checkpoint"] == "prev")
        #expect(outputs["save_rc"] == 0)
        #expect(delegate.itemProgressReports.map { "\($0.0) \($0.1)/\($0.2)" } == ["item-7 5/10"])
        #expect(delegate.itemCheckpoints.map { "\($0.0) \(String(decoding: $0.1, as: UTF8.self))" } == ["item-7 ck"])
        #expect(delegate.itemsDone.map { "\($0.0) \($0.1 ?? "ok")" } == ["item-7 boom"])
    }

    @Test func closedSessionWithoutItems() async throws {
        let delegate = RecordingDelegate()
        delegate.queue([.closed])
        #expect(try await runFixture("probe.item", in: "hostprobe", [:], delegate: delegate).outputs == ["closed": true])
    }
}
