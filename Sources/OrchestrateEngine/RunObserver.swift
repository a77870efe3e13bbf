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
    /// How long a round's journal commit took (for the store-latency metric). Default: ignored.
    func storeCommitted(seconds: Double)
}

extension RunObserver {
    public func runProgress(step: String, progress: ProgressSnapshot) {}
    public func storeCommitted(seconds: Double) {}
}

/// Several observers as one (`serve` prints events and counts them for `/metrics`).
public struct RunObservers: RunObserver {
    public let observers: [any RunObserver]

    public init(_ observers: [any RunObserver]) { self.observers = observers }

    public func runEvent(_ event: EventRecord) { for observer in observers { observer.runEvent(event) } }
    public func runProgress(step: String, progress: ProgressSnapshot) {
        for observer in observers { observer.runProgress(step: step, progress: progress) }
    }
    public func storeCommitted(seconds: Double) { for observer in observers { observer.storeCommitted(seconds: seconds) } }
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
