/// Decides when a file has settled: its signature (size and mtime) must be seen unchanged
/// across `settle` seconds. Any change seen restarts its wait, so a file still being written
/// (every write moves its mtime) is never due, and one that disappears is forgotten.
///
/// Pure bookkeeping over times the caller passes in, so tests drive it without waiting.
struct SettleTracker {
    let settle: Double
    private var candidates: [String: (signature: FileSignature, since: Double)] = [:]

    init(settle: Double) {
        self.settle = settle
    }

    var count: Int { candidates.count }

    /// Records what `path` looks like at `now` (nil: gone or no longer a regular file).
    mutating func observe(_ path: String, _ signature: FileSignature?, now: Double) {
        guard let signature else {
            candidates.removeValue(forKey: path)
            return
        }
        if candidates[path]?.signature != signature { candidates[path] = (signature, now) }
    }

    mutating func forget(_ path: String) { candidates.removeValue(forKey: path) }

    func isTracked(_ path: String) -> Bool { candidates[path] != nil }

    /// Paths unchanged since at least `settle` ago, oldest first, with the signature seen.
    func due(now: Double) -> [(path: String, signature: FileSignature)] {
        candidates.filter { now - $0.value.since >= settle }
            .sorted { ($0.value.since, $0.key) < ($1.value.since, $1.key) }
            .map { ($0.key, $0.value.signature) }
    }

    /// When the next candidate becomes due, if any.
    var nextDue: Double? { candidates.values.map { $0.since + settle }.min() }
}
