import Foundation
import OrchestrateEngine
import OrchestrateJSON
import OrchestrateLock
import OrchestrateOperations
import OrchestrateStore
import Prometheus

/// The Prometheus metrics of one `serve` process, served at `/metrics` (docs/metrics.md).
///
/// Counters and histograms are fed by the events the engine journals in this process (it is a
/// `RunObserver`): counting costs a dictionary look-up under a lock per event, never a store
/// call. Gauges (runs by queue and status, queue depth, held steps) are counted by the store
/// when Prometheus scrapes (`refreshGauges`), so they cover every node sharing the store.
///
/// ```swift
/// let metrics = ServeMetrics()
/// let worker = QueueWorker(store: store, registry: registry, options: options, observer: metrics)
/// try metrics.refreshGauges(from: store); print(metrics.text())
/// ```
public final class ServeMetrics: RunObserver, @unchecked Sendable {
    let registry = PrometheusCollectorRegistry()
    private let lock = Lock()
    /// Per run, per step instance: what its running attempt is and how far its transfer got.
    private var steps: [String: [String: StepState]] = [:]  // guarded by lock
    /// (queue, status) pairs seen at earlier scrapes, set to 0 once no run has them.
    private var knownRunGauges: Set<[String]> = []  // guarded by lock
    private var knownQueues: Set<String> = []  // guarded by lock
    /// The counters, gauges and histograms made so far, by name and labels. The registry would
    /// give the same one back, but only after building and checking its name and help text
    /// under its lock: at every event of every step that cost the engine more than counting.
    private var handles: [String: AnyObject] = [:]  // guarded by handlesLock
    private let handlesLock = Lock()

    private struct StepState {
        var stepType: String
        var attemptStarted: Double?
        /// The `bytes_moved` of the running attempt counted so far: what the attempt moved
        /// itself, never the bytes it found on disk when it resumed.
        var bytesMoved: Int64 = 0
    }

    static let durationBuckets: [Double] = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600]
    static let commitBuckets: [Double] = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5]

    public init() {
        // Registered at once, so a scrape before the first run already shows them (at 0).
        _ = commitHistogram
        _ = gauge(.stepsHeld, [])
    }

    // MARK: Names (MetricDefinition lists them)

    private func descriptor(_ metric: MetricDefinition) -> MetricNameDescriptor {
        MetricNameDescriptor(namespace: "orchestrate", metricName: metric.name, unitName: metric.unit, helpText: metric.help)
    }

    /// The metric `name` with `labels`, made by `make` the first time.
    private func handle<Metric: AnyObject>(_ name: String, _ labels: [(String, String)], _ make: () -> Metric) -> Metric {
        var key = name
        for (label, value) in labels { key += "\u{0}" + label + "\u{0}" + value }
        return handlesLock.withLock {
            if let known = handles[key] as? Metric { return known }
            let metric = make()
            handles[key] = metric
            return metric
        }
    }

    private func counter(_ metric: MetricDefinition, _ labels: [(String, String)]) -> Counter {
        handle(metric.name, labels) { registry.makeCounter(descriptor: descriptor(metric), labels: labels) }
    }

    func gauge(_ metric: MetricDefinition, _ labels: [(String, String)]) -> Gauge {
        handle(metric.name, labels) { registry.makeGauge(descriptor: descriptor(metric), labels: labels) }
    }

    private func histogram(_ metric: MetricDefinition, _ labels: [(String, String)], buckets: [Double]) -> ValueHistogram {
        handle(metric.name, labels) {
            registry.makeValueHistogram(descriptor: descriptor(metric), labels: labels, buckets: buckets)
        }
    }

    private var commitHistogram: ValueHistogram {
        histogram(.storeCommit, [], buckets: Self.commitBuckets)
    }

    // MARK: Fed by the engine

    public func storeCommitted(seconds: Double) {
        commitHistogram.record(seconds)
    }

    public func runEvent(_ event: EventRecord) {
        guard let runID = event.runID else { return }
        let data = event.data
        switch event.type {
        case .runStarted:
            let queue = data["queue"]?.stringValue ?? "default"
            let waited = Double(data["waited_ms"]?.intValue ?? 0) / 1000
            histogram(.queueWait, [("queue", queue)], buckets: Self.durationBuckets)
                .record(waited)
        case .runFinished:
            counter(.runsFinished, [("status", data["status"]?.stringValue ?? "unknown")])
                .increment()
            lock.withLock { _ = steps.removeValue(forKey: runID) }
        case .runInterrupted:
            lock.withLock { _ = steps.removeValue(forKey: runID) }
        case .stepStarted:
            // A for_each parent's start carries `items`, not `attempt`: it is no attempt.
            guard let step = event.step, let uses = data["uses"]?.stringValue, data["attempt"] != nil else { return }
            lock.withLock {
                steps[runID, default: [:]][step, default: StepState(stepType: uses)].attemptStarted = event.time
                steps[runID]![step]!.bytesMoved = 0
            }
            counter(.stepAttempts, [("step_type", uses)]).increment()
        case .stepProgress:
            guard let step = event.step, let attemptMoved = data["bytes_moved"]?.intValue else { return }
            let moved = lock.withLock { () -> (Int64, String)? in
                guard var state = steps[runID]?[step], attemptMoved > state.bytesMoved else { return nil }
                let delta = attemptMoved - state.bytesMoved
                state.bytesMoved = attemptMoved
                steps[runID]![step] = state
                return (delta, state.stepType)
            }
            if let (delta, stepType) = moved {
                counter(.bytesMoved, [("direction", Self.direction(of: stepType)), ("plugin", Self.plugin(of: stepType))])
                    .increment(by: delta)
            }
        case .stepSucceeded, .stepRetrying, .stepFailed, .stepCancelled, .stepInterrupted:
            guard let step = event.step, data["attempt"] != nil else { return }
            let final = event.type != .stepRetrying && event.type != .stepInterrupted
            let state = lock.withLock { () -> StepState? in
                guard var state = steps[runID]?[step] else { return nil }
                let started = state
                state.attemptStarted = nil
                steps[runID]![step] = final ? nil : state
                return started
            }
            guard let state else { return }
            let outcome = event.type == .stepRetrying ? "failed" : String(event.type.rawValue.dropFirst("step.".count))
            if let started = state.attemptStarted {
                histogram(.stepDuration, [("step_type", state.stepType), ("outcome", outcome)], buckets: Self.durationBuckets)
                    .record(max(0, event.time - started))
            }
            if event.type == .stepRetrying || event.type == .stepFailed {
                counter(.stepFailures, [("step_type", state.stepType), ("kind", data["kind"]?.stringValue ?? ""),
                                        ("code", data["code"]?.stringValue ?? "")]).increment()
            }
        default:
            break
        }
    }

    /// `http.upload` → `http`.
    static func plugin(of stepType: String) -> String {
        String(stepType.prefix { $0 != "." })
    }

    /// From the step type's name: `*.upload` and `*.accept-paths` upload, `*.download`
    /// downloads, anything else (`fs.copy`, `exec`) is `local`.
    static func direction(of stepType: String) -> String {
        let name = stepType.drop { $0 != "." }
        if name.contains("upload") || name.contains("accept") { return "upload" }
        if name.contains("download") { return "download" }
        return "local"
    }

    // MARK: Read at scrape

    /// Sets the gauges from the store's counts (a queue or status no run has any more goes to 0).
    public func refreshGauges(from store: any StateStore) throws {
        let figures = try store.queueFigures()
        let now = try store.now()
        lock.withLock {
            var seen: Set<[String]> = []
            for count in figures.runs {
                seen.insert([count.queue, count.status.rawValue])
                knownQueues.insert(count.queue)
            }
            knownRunGauges.formUnion(seen)
            for key in knownRunGauges {
                let runs = figures.runs.first { $0.queue == key[0] && $0.status.rawValue == key[1] }?.runs ?? 0
                gauge(.runs, [("queue", key[0]), ("status", key[1])]).set(Double(runs))
            }
            for queue in knownQueues {
                let depth = figures.runs.first { $0.queue == queue && $0.status == .queued }?.runs ?? 0
                gauge(.queueDepth, [("queue", queue)]).set(Double(depth))
                gauge(.queueOldestWait, [("queue", queue)]).set(figures.oldestQueued[queue].map { max(0, now - $0) } ?? 0)
            }
        }
        gauge(.stepsHeld, []).set(Double(figures.heldSteps))
    }

    /// The Prometheus text exposition format.
    public func text() -> String { registry.emitToString() }
}
