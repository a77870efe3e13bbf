import OrchestrateJSON

/// Everything the engine decides about one attempt of one step, handed to the plugin as
/// `orc_step_call`.
public struct StepRequest: Sendable {
    public var runID: String
    /// The step's id in the workflow (`upload`, or `upload[3]` inside a for_each).
    public var stepID: String
    /// The resolved `with:` block; must be a JSON object.
    public var inputs: JSONValue
    /// Evaluated once and persisted by the engine, so every attempt sends the same key.
    public var idempotencyKey: String?
    /// A directory private to the run; must exist before `run()`.
    public var runDir: String
    /// 1 for the first attempt.
    public var attempt: Int
    /// A retryable failure of this attempt will not be retried (`ORC_CALL_LAST_ATTEMPT`).
    public var isLastAttempt = false
    /// The attempt's time limit. `StepInvocation.run()` enforces it with `cancel(.timeout)`.
    public var timeout: Duration?
    /// The checkpoint saved by an earlier attempt, given back to the plugin by load_checkpoint.
    public var checkpoint: [UInt8]?
    /// The bandwidth caps the step's network bytes count against (`--max-rate`), or nil for
    /// none. Plugins reach it through the `orchestrate.bandwidth.v1` extension.
    public var bandwidth: (any BandwidthAccount)?

    public init(runID: String, stepID: String, inputs: JSONValue, idempotencyKey: String? = nil,
                runDir: String, attempt: Int = 1, timeout: Duration? = nil, checkpoint: [UInt8]? = nil,
                bandwidth: (any BandwidthAccount)? = nil)
    {
        self.bandwidth = bandwidth
        self.runID = runID
        self.stepID = stepID
        self.inputs = inputs
        self.idempotencyKey = idempotencyKey
        self.runDir = runDir
        self.attempt = attempt
        self.timeout = timeout
        self.checkpoint = checkpoint
    }
}

/// `ORC_LOG_*`. Unknown levels from a plugin are clamped into this range.
public enum LogLevel: Int32, Sendable {
    case debug = 0, info, warn, error
}

/// Absolute progress figures of a step; -1 means unknown.
public struct StepProgress: Sendable, Equatable {
    public var bytesDone: Int64
    public var bytesTotal: Int64
    public var filesDone: Int64
    public var filesTotal: Int64

    public init(bytesDone: Int64 = -1, bytesTotal: Int64 = -1, filesDone: Int64 = -1, filesTotal: Int64 = -1) {
        self.bytesDone = bytesDone
        self.bytesTotal = bytesTotal
        self.filesDone = filesDone
        self.filesTotal = filesTotal
    }
}

/// What the scheduler does with a failure: `retryable` and `timeout` may be retried, the others
/// are final. The raw values are the names workflows use in `retry.non_retryable`.
public enum ErrorKind: String, Sendable {
    case retryable, permanent, invalidInput = "invalid-input", timeout, cancelled

    /// Maps an `ORC_ERROR_*` value; anything unknown is permanent, as the header promises.
    init(abiValue: Int32) {
        switch abiValue {
        case 1: self = .retryable
        case 2: self = .permanent
        case 3: self = .invalidInput
        case 4: self = .timeout
        case 5: self = .cancelled
        default: self = .permanent
        }
    }
}

/// Why a step attempt failed, as the plugin reported it through set_error (or as the host
/// concluded when it did not).
public struct StepFailure: Error, Sendable, CustomStringConvertible {
    public var kind: ErrorKind
    /// Short machine-readable code ("http_503", "ENOENT", "exit_2"), if the plugin gave one.
    public var code: String?
    public var message: String
    /// The plugin's retry hint (e.g. HTTP Retry-After); overrides the computed backoff.
    public var retryAfter: Duration?

    public init(kind: ErrorKind, code: String? = nil, message: String, retryAfter: Duration? = nil) {
        self.kind = kind
        self.code = code
        self.message = message
        self.retryAfter = retryAfter
    }

    public var description: String {
        "\(kind.rawValue)" + (code.map { " [\($0)]" } ?? "") + ": \(message)"
    }
}

/// Why the engine stops a running step. Decides the failure kind when the plugin stops.
public enum CancelReason: Sendable {
    /// The run (or this step) was cancelled by a user.
    case cancelled
    /// The attempt's time limit passed.
    case timeout
    /// The engine is shutting down; the step will run again on resume.
    case shutdown
}

/// What `StepHostDelegate.nextItem` found.
public enum NextItem: Sendable {
    /// An item to hand out; `checkpoint` is what save_item_checkpoint stored for it earlier.
    case item(id: String, json: String, checkpoint: [UInt8]?)
    /// Nothing arrived within the timeout.
    case timeout
    /// The session is closing and every item was handed out.
    case closed
}
