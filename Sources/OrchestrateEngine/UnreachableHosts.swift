/// Network awareness's bookkeeping for one run: the steps held because their host did not
/// answer (`unreachable`), grouped by host, the probing of each such host, when each held step
/// gives up (its `hold_timeout`), and when each is due to say again that it still waits.
///
/// A held step spends no attempt; it waits for its host. The host is probed (a TCP connect, on an
/// attempt thread) a second after the first hold, then with a backoff that doubles up to 30 s.
/// When a probe gets an answer, every step held on that host is released at once. A step still
/// held at its give-up time leaves the bookkeeping through `expired` (the caller fails it).
///
/// Invariants: a host is probed exactly while it holds steps (`hold` starts its probing; a
/// successful probe, the last expiry and `releaseAll` end it); a probe under way is never started
/// again before its answer; the delay between probes never exceeds `maxDelay`.
struct UnreachableHosts {
    /// The probing of one host: when next, the current backoff, whether a probe is under way,
    /// and why the host did not answer last (the step's error, then each probe's).
    private struct Probing {
        var next: Double
        var delay: Double
        var inFlight = false
        var reason: String
    }

    /// One held step: its host, when it gives up, and when it next reports that it still waits.
    private struct HeldStep {
        let endpoint: Endpoint
        let since: Double
        let givesUpAt: Double
        var nextReport: Double
    }

    /// What a held step reports while it waits (`step.waiting`).
    struct Waiting: Equatable {
        let instanceID: String
        let endpoint: Endpoint
        let reason: String
        /// When the host is probed next (now or past while a probe is under way).
        let nextProbe: Double
        let since: Double
        let givesUpAt: Double
    }

    static let firstDelay = 1.0
    static let maxDelay = 30.0

    /// How often a held step says it still waits.
    let reportInterval: Double

    private var held: [Endpoint: Set<String>] = [:]
    private var steps: [String: HeldStep] = [:]
    private var probing: [Endpoint: Probing] = [:]

    init(reportInterval: Double = 60) {
        self.reportInterval = reportInterval
    }

    var heldCount: Int { steps.count }

    /// Holds `instanceID` until `endpoint` answers or `holdTimeout` seconds have passed. The
    /// host's first probe is due `firstDelay` after `now`, unless it is being probed already.
    mutating func hold(_ instanceID: String, on endpoint: Endpoint, reason: String, holdTimeout: Double, now: Double) {
        held[endpoint, default: []].insert(instanceID)
        steps[instanceID] = HeldStep(endpoint: endpoint, since: now, givesUpAt: now + holdTimeout,
                                     nextReport: now + reportInterval)
        if probing[endpoint] == nil {
            probing[endpoint] = Probing(next: now + Self.firstDelay, delay: Self.firstDelay, reason: reason)
        }
    }

    /// The hosts whose probe is due at `now` and not under way, each now marked under way: the
    /// caller starts them and reports each answer to `probed`.
    mutating func startDueProbes(now: Double) -> [Endpoint] {
        var due: [Endpoint] = []
        for (endpoint, state) in probing where !state.inFlight && state.next <= now {
            probing[endpoint]?.inFlight = true
            due.append(endpoint)
        }
        return due
    }

    /// The earliest time a probe that is not under way is due (nil: none is).
    var nextProbeDue: Double? {
        var earliest: Double?
        for state in probing.values where !state.inFlight { earliest = min(earliest ?? state.next, state.next) }
        return earliest
    }

    /// The earliest time something is due (a probe not under way, a give-up, a report), for the
    /// loop's sleep; nil when nothing is held.
    var nextDue: Double? {
        var earliest = nextProbeDue
        for step in steps.values { earliest = min(earliest ?? step.givesUpAt, step.givesUpAt, step.nextReport) }
        return earliest
    }

    /// A probe's answer: `failure` nil when the host answered, else why not. If the host
    /// answered, its probing ends and its held steps are returned, released; if not, it is probed
    /// again after twice the last delay (at most `maxDelay`). An answer for a host no longer
    /// probed (the run began ending meanwhile) releases nothing.
    mutating func probed(_ endpoint: Endpoint, failure: String?, now: Double) -> Set<String> {
        guard var state = probing[endpoint] else { return [] }
        if let failure {
            state.delay = min(state.delay * 2, Self.maxDelay)
            state.next = now + state.delay
            state.inFlight = false
            state.reason = failure
            probing[endpoint] = state
            return []
        }
        probing.removeValue(forKey: endpoint)
        let released = held.removeValue(forKey: endpoint) ?? []
        for id in released { steps.removeValue(forKey: id) }
        return released
    }

    /// The held steps whose give-up time has come, removed (a host left without held steps is
    /// no longer probed), each with what it last knew: the caller fails them.
    mutating func expired(now: Double) -> [Waiting] {
        let due = steps.filter { $0.value.givesUpAt <= now }.keys.sorted()
        return due.compactMap { id in
            guard let waiting = waiting(id) else { return nil }
            steps.removeValue(forKey: id)
            held[waiting.endpoint]?.remove(id)
            if held[waiting.endpoint]?.isEmpty == true {
                held.removeValue(forKey: waiting.endpoint)
                probing.removeValue(forKey: waiting.endpoint)
            }
            return waiting
        }
    }

    /// The held steps due to say that they still wait at `now`; each is next due a
    /// `reportInterval` later.
    mutating func dueReports(now: Double) -> [Waiting] {
        let due = steps.filter { $0.value.nextReport <= now }.keys.sorted()
        return due.compactMap { id in
            steps[id]?.nextReport = now + reportInterval
            return waiting(id)
        }
    }

    /// What held step `id` knows now, or nil when it is not held.
    func waiting(_ id: String) -> Waiting? {
        guard let step = steps[id], let state = probing[step.endpoint] else { return nil }
        return Waiting(instanceID: id, endpoint: step.endpoint, reason: state.reason, nextProbe: state.next,
                       since: step.since, givesUpAt: step.givesUpAt)
    }

    /// The run is ending: every host's probing stops, and the steps held on any are returned.
    mutating func releaseAll() -> [String] {
        defer {
            held.removeAll()
            steps.removeAll()
            probing.removeAll()
        }
        return held.values.flatMap { $0 }
    }
}
