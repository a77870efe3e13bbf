import OrchestrateJSON
import OrchestrateStore

/// The event types a run journals (and `--json` prints as JSON lines). Stable: scripts read them.
public enum EventType {
    public static let runStarted = "run.started"
    public static let runResumed = "run.resumed"
    public static let runFinished = "run.finished"
    public static let runCompensating = "run.compensating"
    public static let runInterrupted = "run.interrupted"
    public static let stepStarted = "step.started"
    public static let stepRetrying = "step.retrying"
    public static let stepSucceeded = "step.succeeded"
    public static let stepFailed = "step.failed"
    public static let stepSkipped = "step.skipped"
    public static let stepCancelled = "step.cancelled"
    public static let stepInterrupted = "step.interrupted"
    public static let stepWaiting = "step.waiting"
    public static let stepHeld = "step.held"
    public static let stepReleased = "step.released"
    public static let stepProgress = "step.progress"
    public static let stepLog = "step.log"
    public static let sessionReopening = "session.reopening"
    public static let sessionClosed = "session.closed"
    public static let hookSucceeded = "hook.succeeded"
    public static let hookFailed = "hook.failed"
    public static let itemStarted = "item.started"
    public static let itemProgress = "item.progress"
    public static let itemFinished = "item.finished"
}

/// Someone watching a run as it executes (the CLI's printer). Called on the engine's threads
/// after the event is durable; must be thread-safe and quick.
public protocol RunObserver: Sendable {
    func runEvent(_ event: EventRecord)
    /// Progress, more often than it is journaled (for live displays). Default: ignored.
    func runProgress(step: String, progress: ProgressSnapshot)
}

extension RunObserver {
    public func runProgress(step: String, progress: ProgressSnapshot) {}
}

/// A step's progress as the engine knows it.
public struct ProgressSnapshot: Sendable, Equatable {
    public var bytesDone: Int64
    public var bytesTotal: Int64
    public var filesDone: Int64
    public var filesTotal: Int64
    /// Bytes per second since the attempt started.
    public var rate: Double

    public init(bytesDone: Int64, bytesTotal: Int64, filesDone: Int64, filesTotal: Int64, rate: Double) {
        self.bytesDone = bytesDone
        self.bytesTotal = bytesTotal
        self.filesDone = filesDone
        self.filesTotal = filesTotal
        self.rate = rate
    }

    public var json: JSONValue {
        ["bytes_done": .int(bytesDone), "bytes_total": .int(bytesTotal), "files_done": .int(filesDone),
         "files_total": .int(filesTotal), "rate": .double(rate.rounded())]
    }
}
