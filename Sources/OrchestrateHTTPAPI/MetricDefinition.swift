/// The metrics `serve` exposes at `/metrics`, in one table: `ServeMetrics` makes each one from
/// its definition, and `orchestrate schema metrics` prints the table for the generated
/// reference (docs/reference/metrics.md). A metric is added here, never named twice.
public struct MetricDefinition: Sendable {
    public enum Kind: String, Sendable { case counter, gauge, histogram }

    /// The name without the `orchestrate_` namespace and the unit.
    public let name: String
    public let kind: Kind
    /// `total` for counters, `seconds` for histograms, as Prometheus' conventions want.
    public let unit: String
    public let help: String
    public let labels: [String]

    /// The name Prometheus shows: `orchestrate_NAME_UNIT`.
    public var fullName: String { "orchestrate_" + name + (unit.isEmpty ? "" : "_" + unit) }

    init(_ kind: Kind, _ name: String, unit: String? = nil, _ help: String, labels: [String] = []) {
        self.kind = kind
        self.name = name
        self.unit = unit ?? [.counter: "total", .histogram: "seconds", .gauge: ""][kind]!
        self.help = help
        self.labels = labels
    }

    // Fed by the engine's events in this process.
    static let storeCommit = MetricDefinition(.histogram, "store_commit", "Time to commit one scheduling round's journal to the store")
    static let queueWait = MetricDefinition(.histogram, "queue_wait", "Time from submission to a run's first start", labels: ["queue"])
    static let runsFinished = MetricDefinition(.counter, "runs_finished", "Runs this serve finished, by final status", labels: ["status"])
    static let stepAttempts = MetricDefinition(.counter, "step_attempts", "Step attempts started, by step type", labels: ["step_type"])
    static let bytesMoved = MetricDefinition(
        .counter, "bytes_moved",
        "Bytes moved by steps and session items (not those found on disk at a resume), by direction and plugin",
        labels: ["direction", "plugin"])
    static let stepDuration = MetricDefinition(.histogram, "step_duration", "Step attempt durations, by step type and outcome",
                                               labels: ["step_type", "outcome"])
    static let stepFailures = MetricDefinition(.counter, "step_failures",
                                               "Failed step attempts, by step type, error kind and error code",
                                               labels: ["step_type", "kind", "code"])
    // Counted by the store at each scrape: every node sharing it.
    static let runs = MetricDefinition(.gauge, "runs", "Runs in the store, by queue and stored status", labels: ["queue", "status"])
    static let queueDepth = MetricDefinition(.gauge, "queue_depth", "Queued runs waiting to start, by queue", labels: ["queue"])
    static let queueOldestWait = MetricDefinition(.gauge, "queue_oldest_wait", unit: "seconds",
                                                  "Seconds the oldest queued run of the queue has waited (0 when none waits)",
                                                  labels: ["queue"])
    static let stepsHeld = MetricDefinition(
        .gauge, "steps_held", "Steps held because their host stopped answering (error code unreachable), in the whole store")

    /// Every metric, as the reference lists them.
    public static let all: [MetricDefinition] = [
        storeCommit, queueWait, runsFinished, stepAttempts, bytesMoved, stepDuration, stepFailures,
        runs, queueDepth, queueOldestWait, stepsHeld,
    ]
}
