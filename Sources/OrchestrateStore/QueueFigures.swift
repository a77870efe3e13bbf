/// What `/metrics` reads from the store at each scrape (`StateStore.queueFigures()`): counts
/// made by the database, never the records themselves, so a scrape costs the same with ten
/// runs or a hundred thousand.
public struct QueueFigures: Sendable, Equatable {
    public struct Count: Sendable, Equatable {
        public var queue: String
        /// The stored status: a `running` run whose owner died counts as `running` here (the API
        /// shows it as `interrupted`, a judgement made per record).
        public var status: RunStatus
        public var runs: Int

        public init(queue: String, status: RunStatus, runs: Int) {
            self.queue = queue
            self.status = status
            self.runs = runs
        }
    }

    /// Runs per queue and status, sorted by queue then status.
    public var runs: [Count]
    /// Per queue with queued runs: when its oldest queued run was submitted.
    public var oldestQueued: [String: Double]
    /// Steps held because their host stopped answering (error code `unreachable`).
    public var heldSteps: Int

    public init(runs: [Count], oldestQueued: [String: Double], heldSteps: Int) {
        self.runs = runs.sorted { ($0.queue, $0.status.rawValue) < ($1.queue, $1.status.rawValue) }
        self.oldestQueued = oldestQueued
        self.heldSteps = heldSteps
    }

    /// Each queue's oldest queued run, through the index of queued runs by queue and age (both
    /// stores; the queues come from the counts).
    static let oldestQueuedSQL = "SELECT MIN(created_at) AS oldest FROM runs WHERE status = 'queued' AND queue = "
    static let heldSQL = "SELECT COUNT(*) AS n FROM steps WHERE status = 'held'"
}
