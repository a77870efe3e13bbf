import COrchestratePlugin
import OrchestrateJSON

/// Log levels (`ORC_LOG_*`).
public enum LogLevel: Int32, Sendable {
    case debug = 0, info, warn, error
}

/// Everything a running step sees: its inputs, facts about the attempt, and the host's
/// callbacks as Swift methods.
///
/// Valid only while `run` is executing. The methods may be called from any thread the step
/// creates (a reader thread logging a child's output, say), but none after `run` returns.
public final class StepContext: @unchecked Sendable {
    /// The resolved `with:` object, checked against the step's schema with its defaults filled
    /// in by the host. Read it with `read(_:)` and a `StepInputs` struct.
    public let inputs: JSONValue
    /// The step type being run (`fs.copy`).
    public let stepType: String
    public let runID: String
    /// The step's id in the workflow (`upload`, `upload[3]`).
    public let stepID: String
    /// A directory private to the run, for temporary files; exists.
    public let runDir: String
    /// Send it to the server when the effect must happen once (e.g. Idempotency-Key).
    public let idempotencyKey: String?
    /// 1 for the first attempt.
    public let attempt: Int
    /// A retryable failure of this attempt will not be retried (the `retry:` attempts are used
    /// up): clean up what a later attempt would have continued from. False when the host
    /// cannot tell.
    public let isLastAttempt: Bool
    /// The attempt's limit; the host cancels the step when it passes (informational here).
    public let timeout: Duration?

    let api: UnsafePointer<orc_host_api>
    let host: OpaquePointer?
    /// The `orchestrate.bandwidth.v1` extension, when the host has it.
    private let bandwidth: UnsafePointer<orc_bandwidth_v1>?
    /// The `orchestrate.item-failure.v1` extension, when the host has it.
    let itemFailure: UnsafePointer<orc_item_failure_v1>?

    init(call: UnsafePointer<orc_step_call>, api: UnsafePointer<orc_host_api>, host: OpaquePointer?) throws(StepError) {
        let c = call.pointee
        func text(_ p: UnsafePointer<CChar>?) -> String { p.map { String(cString: $0) } ?? "" }
        self.api = api
        self.host = host
        bandwidth = StepContext.extensionTable(api, host, ORC_EXT_BANDWIDTH_V1, as: orc_bandwidth_v1.self)
        itemFailure = StepContext.extensionTable(api, host, ORC_EXT_ITEM_FAILURE_V1, as: orc_item_failure_v1.self)
        stepType = text(c.step_type)
        runID = text(c.run_id)
        stepID = text(c.step_id)
        runDir = text(c.run_dir)
        idempotencyKey = c.idempotency_key.map { String(cString: $0) }
        attempt = Int(c.attempt)
        isLastAttempt = c.flags & UInt32(ORC_CALL_LAST_ATTEMPT) != 0
        timeout = c.timeout_ms >= 0 ? .milliseconds(c.timeout_ms) : nil
        do {
            inputs = try JSONValue(parsing: text(c.inputs_json))
        } catch {
            throw .invalidInput("the step inputs are not valid JSON: \(error)")
        }
    }

    // MARK: - Logs and progress

    /// Writes a log line (several, if `message` has newlines). Never log secrets or whole inputs.
    public func log(_ level: LogLevel, _ message: String) {
        api.pointee.log(host, level.rawValue, message)
    }

    /// Reports absolute progress; pass -1 (the default) for what is unknown. Cheap: the host
    /// throttles.
    public func progress(bytesDone: Int64 = -1, bytesTotal: Int64 = -1, filesDone: Int64 = -1, filesTotal: Int64 = -1) {
        api.pointee.progress(host, bytesDone, bytesTotal, filesDone, filesTotal)
    }

    // MARK: - Cancellation

    /// True once the step has been asked to stop. Poll it between units of work.
    public var isCancelled: Bool { api.pointee.is_cancelled(host) != 0 }

    /// A file descriptor that becomes readable when the step is cancelled: add it to your
    /// poll() set. Never read, write or close it.
    public var cancelFD: Int32 { api.pointee.cancel_fd(host) }

    /// Sleeps up to `milliseconds`; returns true if woken by cancellation.
    @discardableResult
    public func sleep(milliseconds: Int64) -> Bool { api.pointee.sleep_ms(host, milliseconds) != 0 }

    /// Sleeps up to `duration`; returns true if woken by cancellation.
    @discardableResult
    public func sleep(for duration: Duration) -> Bool {
        let (seconds, attoseconds) = duration.components
        return sleep(milliseconds: seconds * 1000 + attoseconds / 1_000_000_000_000_000)
    }

    /// Throws `StepError.cancelled` when the step has been cancelled.
    public func checkCancellation() throws(StepError) {
        if isCancelled { throw .cancelled("\(stepType) was cancelled") }
    }

    // MARK: - Bandwidth

    /// Accounts `bytes` sent or received over the network against the run's and the host's
    /// bandwidth caps (`--max-rate`), waiting as long as they say. Call it per chunk, before
    /// sending or after receiving. Returns true when the step was cancelled while waiting.
    /// Costs nothing measurable when no cap is set.
    @discardableResult
    public func consumeBandwidth(_ bytes: Int) -> Bool {
        guard bytes > 0, let bandwidth, let consume = bandwidth.pointee.consume else { return false }
        return consume(host, Int64(bytes)) != 0
    }

    /// An extension table the host provides, checked to be large enough to hold `T`.
    private static func extensionTable<T>(_ api: UnsafePointer<orc_host_api>, _ host: OpaquePointer?,
                                          _ id: String, as: T.Type) -> UnsafePointer<T>?
    {
        let available = Int(api.pointee.struct_size)
        guard let offset = MemoryLayout<orc_host_api>.offset(of: \orc_host_api.get_extension),
              offset + MemoryLayout<UnsafeRawPointer>.size <= available,
              let getExtension = api.pointee.get_extension, let raw = getExtension(host, id)
        else { return nil }
        guard raw.load(as: UInt32.self) >= UInt32(MemoryLayout<T>.size) else { return nil }
        return raw.assumingMemoryBound(to: T.self)
    }

    // MARK: - Outputs

    /// Sets output `name` (visible as `steps.<id>.outputs.<name>` if the step succeeds).
    public func setOutput(_ name: String, _ value: JSONValue) {
        _ = api.pointee.set_output(host, name, value.jsonText)
    }

    // MARK: - Checkpoints

    /// Saves the step's checkpoint (at most 1 MiB; never put a secret in it). Returns true when
    /// it is durable: a later attempt gets it from `loadCheckpoint`.
    @discardableResult
    public func saveCheckpoint(_ bytes: [UInt8]) -> Bool {
        bytes.withUnsafeBufferPointer { api.pointee.save_checkpoint(host, $0.baseAddress, $0.count) } == 0
    }

    /// Saves a JSON checkpoint (see `saveCheckpoint(_:)`).
    @discardableResult
    public func saveCheckpoint(json: JSONValue) -> Bool { saveCheckpoint(Array(json.jsonText.utf8)) }

    /// The last checkpoint saved by this attempt or an earlier one, or nil.
    public func loadCheckpoint() -> [UInt8]? {
        var size = 0
        guard let bytes = api.pointee.load_checkpoint(host, &size) else { return nil }
        return Array(UnsafeBufferPointer(start: bytes, count: size))
    }

    /// The checkpoint parsed as JSON, or nil when there is none or it is not JSON.
    public func loadCheckpointJSON() -> JSONValue? {
        loadCheckpoint().flatMap { try? JSONValue(parsing: $0) }
    }
}
