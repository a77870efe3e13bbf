#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import OrchestrateLock
import COrchestratePlugin
import OrchestrateJSON

/// One attempt of one step: checks the resolved inputs and fills their defaults
/// (`ResolvedInputs`), builds the `orc_step_call`, calls the plugin's `run`, and turns what the
/// plugin reported into a result.
///
/// ```swift
/// let invocation = StepInvocation(stepType: copy, request: request, delegate: myDelegate)
/// // on a thread of your own (run blocks for as long as the step takes):
/// switch invocation.run() {
/// case .success(let outputs): ...            // outputs["sha256"]
/// case .failure(let failure): ...            // failure.kind decides retry
/// }
/// // from anywhere, at any time (before, during or after run):
/// invocation.cancel(.cancelled)
/// ```
///
/// How the plugin's return is interpreted:
/// - `ORC_RUN_OK` is success, even after cancellation (the step finished anyway);
/// - any other value is failure, with the error from set_error (unknown kinds are permanent),
///   or "step returned failure without reporting an error" (permanent) when there is none;
/// - a failure after `cancel` becomes `.timeout` (reason `.timeout`) or `.cancelled` (other
///   reasons), unless the plugin said `invalid-input` or `permanent`, which stand.
///
/// `run()` also enforces `request.timeout` by calling `cancel(.timeout)` when it expires.
/// An invocation runs once; create a new one for the next attempt.
public final class StepInvocation: @unchecked Sendable {
    public let stepType: StepType
    public let request: StepRequest
    private let delegate: any StepHostDelegate
    private let signal = CancelSignal()
    private let lock = Lock()
    private var started = false

    public init(stepType: StepType, request: StepRequest, delegate: any StepHostDelegate) {
        self.stepType = stepType
        self.request = request
        self.delegate = delegate
    }

    /// Blocking: runs the plugin's run function on the calling thread. Call it on a thread of
    /// your own, never on the Swift cooperative pool (a step may block for hours). Returns the
    /// outputs set with set_output, or the failure.
    public func run() -> Result<[String: JSONValue], StepFailure> {
        let first = lock.withLock { () -> Bool in
            defer { started = true }
            return !started
        }
        guard first else {
            return .failure(StepFailure(kind: .permanent, message: "internal error: StepInvocation.run() called twice"))
        }
        if let reason = signal.reason {
            return .failure(stopped(reason, note: "before it started"))
        }
        let inputs: JSONValue
        switch ResolvedInputs.prepare(request.inputs, schema: stepType.inputSchema, stepType: stepType.id, stepID: request.stepID) {
        case .success(let prepared): inputs = prepared
        case .failure(let failure): return .failure(failure)
        }

        let context = CallContext(stepType: stepType.id, request: request, delegate: delegate, signal: signal)
        let strings = CStringArena()
        var call = orc_step_call()
        call.struct_size = UInt32(MemoryLayout<orc_step_call>.size)
        call.step_type = stepType.cID
        call.run_id = strings.add(request.runID)
        call.step_id = strings.add(request.stepID)
        call.inputs_json = strings.add(inputs.jsonText)
        call.idempotency_key = request.idempotencyKey.map { strings.add($0) }
        call.run_dir = strings.add(request.runDir)
        call.attempt = UInt32(clamping: request.attempt)
        call.flags = request.isLastAttempt ? UInt32(ORC_CALL_LAST_ATTEMPT) : 0
        call.timeout_ms = request.timeout.map { Int64(clamping: $0.milliseconds) } ?? -1

        let timer = request.timeout.map { DeadlineTimer.shared.add(signal, milliseconds: $0.milliseconds) }
        let host = context.begin()
        let rc = withUnsafePointer(to: &call) { stepType.run($0, HostAPITable.shared, host) }
        let (outputs, reported) = context.finish()
        if let timer { DeadlineTimer.shared.remove(timer) }
        withExtendedLifetime(strings) {}

        if rc == Int32(ORC_RUN_OK) { return .success(outputs) }
        return .failure(failure(rc: rc, reported: reported))
    }

    /// Thread-safe and idempotent (the first reason wins): is_cancelled turns 1, cancel_fd
    /// becomes readable, sleep_ms and next_item return early. Before `run()`, it makes `run()`
    /// return at once without calling the plugin.
    public func cancel(_ reason: CancelReason) {
        signal.cancel(reason)
    }

    /// True once `cancel` was called.
    public var isCancelled: Bool { signal.isCancelled }

    // MARK: - Interpreting a failed return

    private func failure(rc: Int32, reported: CallContext.ReportedError?) -> StepFailure {
        let reason = signal.reason
        guard let reported else {
            if let reason { return stopped(reason, note: nil) }
            let returned = rc == Int32(ORC_RUN_FAILED) ? "failure" : "\(rc) (neither ORC_RUN_OK nor ORC_RUN_FAILED)"
            return StepFailure(kind: .permanent, message: "step returned \(returned) without reporting an error")
        }
        var kind = ErrorKind(abiValue: reported.kind)
        if let reason, kind != .invalidInput, kind != .permanent {
            kind = reason == .timeout ? .timeout : .cancelled
        }
        let message = reported.message ?? reported.code.map { "step failed (\($0))" } ?? "step failed"
        let retryAfter = reported.retryAfterMs >= 0 ? Duration.milliseconds(reported.retryAfterMs) : nil
        return StepFailure(kind: kind, code: reported.code, message: message, retryAfter: retryAfter)
    }

    private func stopped(_ reason: CancelReason, note: String?) -> StepFailure {
        let suffix = note.map { " " + $0 } ?? ""
        switch reason {
        case .timeout:
            let limit = request.timeout.map { " after \($0.milliseconds) ms" } ?? ""
            return StepFailure(kind: .timeout, code: "timeout", message: "step timed out\(limit)\(suffix)")
        case .cancelled:
            return StepFailure(kind: .cancelled, code: "cancelled", message: "step cancelled\(suffix)")
        case .shutdown:
            return StepFailure(kind: .cancelled, code: "shutdown", message: "step stopped: orchestrate is shutting down\(suffix)")
        }
    }
}

/// NUL-terminated copies of strings that must outlive the plugin call; freed with the arena.
final class CStringArena {
    private var blocks: [UnsafeMutablePointer<CChar>] = []

    init() { blocks.reserveCapacity(6) }

    /// Copies `string` once: `strdup(string)` made a temporary C string of it first (an array
    /// allocated and freed per string: a quarter of the host's side of a no-op step's call).
    func add(_ string: String) -> UnsafePointer<CChar> {
        let copy = string.withCString { strdup($0)! }
        blocks.append(copy)
        return UnsafePointer(copy)
    }

    deinit { blocks.forEach { free($0) } }
}

extension Duration {
    /// Whole milliseconds, clamped to ±Int64.max / 4 so deadlines computed from it cannot overflow.
    var milliseconds: Int64 {
        let (seconds, attoseconds) = components
        let limit = Int64.max / 4
        let (product, overflow) = seconds.multipliedReportingOverflow(by: 1000)
        if overflow { return seconds < 0 ? -limit : limit }
        return min(max(product + attoseconds / 1_000_000_000_000_000, -limit), limit)
    }
}
