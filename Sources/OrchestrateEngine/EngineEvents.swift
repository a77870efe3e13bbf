import OrchestrateJSON
import OrchestrateStore

// The event types a run journals are `EventType` (OrchestrateStore/Vocabulary.swift): the store
// filters on some of them, so they live with it.

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
