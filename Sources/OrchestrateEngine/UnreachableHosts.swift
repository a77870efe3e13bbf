/// Network awareness's bookkeeping for one run: the steps held because their host did not
/// answer (`unreachable`), grouped by host, and the probing of each such host.
///
/// A held step spends no attempt; it waits for its host. The host is probed (a TCP connect, on an
/// attempt thread) a second after the first hold, then with a backoff that doubles up to 30 s.
/// When a probe gets an answer, every step held on that host is released at once.
///
/// Invariants: a host is probed exactly while it holds steps (`hold` starts its probing,
/// `probed(answers: true)` and `releaseAll` end both); a probe under way is never started again
/// before its answer; the delay between probes never exceeds `maxDelay`.
struct UnreachableHosts {
    /// The probing of one host: when next, the current backoff, and whether a probe is under way.
    private struct Probing {
        var next: Double
        var delay: Double
        var inFlight = false
    }

    static let firstDelay = 1.0
    static let maxDelay = 30.0

    private var held: [Endpoint: Set<String>] = [:]
    private var probing: [Endpoint: Probing] = [:]

    /// Holds `instanceID` until `endpoint` answers. The host's first probe is due `firstDelay`
    /// after `now`, unless it is being probed already.
    mutating func hold(_ instanceID: String, on endpoint: Endpoint, now: Double) {
        held[endpoint, default: []].insert(instanceID)
        if probing[endpoint] == nil { probing[endpoint] = Probing(next: now + Self.firstDelay, delay: Self.firstDelay) }
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

    /// The earliest time a probe that is not under way is due (nil: none is), for the loop's sleep.
    var nextProbeDue: Double? {
        var earliest: Double?
        for state in probing.values where !state.inFlight { earliest = min(earliest ?? state.next, state.next) }
        return earliest
    }

    /// A probe's answer. If the host answered, its probing ends and its held steps are returned,
    /// released; if not, it is probed again after twice the last delay (at most `maxDelay`). An
    /// answer for a host no longer probed (the run began ending meanwhile) releases nothing.
    mutating func probed(_ endpoint: Endpoint, answers: Bool, now: Double) -> Set<String> {
        guard var state = probing[endpoint] else { return [] }
        guard answers else {
            state.delay = min(state.delay * 2, Self.maxDelay)
            state.next = now + state.delay
            state.inFlight = false
            probing[endpoint] = state
            return []
        }
        probing.removeValue(forKey: endpoint)
        return held.removeValue(forKey: endpoint) ?? []
    }

    /// The run is ending: every host's probing stops, and the steps held on any are returned.
    mutating func releaseAll() -> [String] {
        defer {
            held.removeAll()
            probing.removeAll()
        }
        return held.values.flatMap { $0 }
    }
}
