import OrchestrateExactPath
/// Decides when a file has settled: its signature (size and mtime) must be seen unchanged
/// across `settle` seconds. Any change seen restarts its wait, so a file still being written
/// (every write moves its mtime) is never due, and one that disappears is forgotten.
///
/// Pure bookkeeping over times the caller passes in, so tests drive it without waiting.
///
/// The watcher asks `due` and `nextDue` at every wake-up (each batch of inotify events), while a
/// folder receiving 100,000 files holds up to that many candidates: both cost what is due, not
/// what is tracked. Candidates are kept in the order their wait started (`waits`, times the
/// caller passes in only grow); a restarted or forgotten wait leaves a stale entry behind,
/// skipped and dropped once it reaches the front, or with every other stale one once they
/// outnumber the live ones.
///
/// What it holds is bounded: at most `capacity` files wait at once (about 120 bytes each, their
/// path included). A file met beyond that is left out and `missedSome` says so: the watcher
/// scans the folder again once room is made, so a folder receiving 100,000 files is taken in
/// `capacity` at a time, at the pace of the hand-offs, rather than all held at once. Emptied, it
/// gives its tables back.
///
/// A full tracker is not kept full by files that never settle (touched every few seconds by
/// someone who can write the folder, to starve the others): a newcomer takes the place of the
/// file admitted longest ago, if that one has kept changing for `holdLimit` (10 × settle, at
/// least 60 s). The file given up is met again by a later scan, so a slow writer loses only time.
struct SettleTracker {
    static let defaultCapacity = 16_384

    let settle: Double
    let capacity: Int
    /// Whether a file was left out since `clearMissed`, the tracker being full.
    private(set) var missedSome = false
    /// Files that gave their place up to a newcomer, having kept changing for `holdLimit`.
    private(set) var givenUp = 0
    /// How long a file that keeps changing may hold a place a newcomer wants.
    var holdLimit: Double { max(10 * settle, 60) }
    /// Byte for byte: two names that differ only in Unicode normalization are two files.
    /// `first`: when it was admitted (its wait may have restarted since: `since`).
    private var candidates: [ExactPath: (signature: FileSignature, since: Double, first: Double)] = [:]
    /// (path, first) in the order files were admitted; stale once that admission is over.
    private var admitted: [(path: String, first: Double)] = []
    private var admittedHead = 0
    /// (path, since) in the order of `since`; an entry whose path's wait is no longer that one
    /// is stale. `head` is the first entry not yet dropped: the front is always a live one.
    private var waits: [(path: String, since: Double)] = []
    private var head = 0

    init(settle: Double, capacity: Int = SettleTracker.defaultCapacity) {
        self.settle = settle
        self.capacity = max(1, capacity)
    }

    var count: Int { candidates.count }

    /// The slots its tables hold (for a path each): what its memory follows.
    var heldSlots: Int { candidates.capacity + waits.capacity + admitted.capacity }

    /// Records what `path` looks like at `now` (nil: gone or no longer a regular file). A new
    /// path is left out when `capacity` files already wait (`missedSome`).
    mutating func observe(_ path: String, _ signature: FileSignature?, now: Double) {
        guard let signature else {
            forget(path)
            return
        }
        let key = ExactPath(path)
        let known = candidates[key]
        guard known?.signature != signature else { return }
        if known == nil && candidates.count >= capacity && !giveUpAPlace(now: now) {
            missedSome = true
            return
        }
        let first = known?.first ?? now
        if known == nil { admitted.append((path, first)) }
        candidates[key] = (signature, now, first)
        if let last = waits.last, last.since > now {
            // A time earlier than one already seen (only a test does that): kept in order.
            let at = waits[head...].firstIndex { $0.since > now } ?? waits.count
            waits.insert((path, now), at: at)
        } else {
            waits.append((path, now))
        }
        dropStaleFront()
    }

    mutating func forget(_ path: String) {
        candidates.removeValue(forKey: ExactPath(path))
        dropStaleFront()
    }

    func isTracked(_ path: String) -> Bool { candidates[ExactPath(path)] != nil }

    /// Before a scan of the whole folder: what it meets is what was missed.
    mutating func clearMissed() { missedSome = false }

    /// Every path waiting (for a scan to forget those it no longer met).
    var paths: [String] { candidates.keys.map(\.string) }

    /// Paths unchanged since at least `settle` ago, oldest first (then by path), with the
    /// signature seen: the first `limit` of them.
    func due(now: Double, limit: Int = .max) -> [(path: String, signature: FileSignature)] {
        var out: [(path: String, signature: FileSignature, since: Double)] = []
        var seen = Set<ExactPath>()
        for wait in waits[head...] {
            guard now - wait.since >= settle, out.count < limit else { break }
            let key = ExactPath(wait.path)
            guard let candidate = candidates[key], candidate.since == wait.since, seen.insert(key).inserted else { continue }
            out.append((wait.path, candidate.signature, wait.since))
        }
        return out.sorted { ($0.since, $0.path) < ($1.since, $1.path) }.map { ($0.path, $0.signature) }
    }

    /// When the next candidate becomes due, if any.
    var nextDue: Double? { head < waits.count ? waits[head].since + settle : nil }

    private func isLive(_ wait: (path: String, since: Double)) -> Bool { candidates[ExactPath(wait.path)]?.since == wait.since }

    /// Frees the place of the file admitted longest ago if it has kept changing (its wait
    /// restarted) for `holdLimit`; false when none may be given up.
    private mutating func giveUpAPlace(now: Double) -> Bool {
        while admittedHead < admitted.count, candidates[ExactPath(admitted[admittedHead].path)]?.first != admitted[admittedHead].first {
            admittedHead += 1
        }
        guard admittedHead < admitted.count else { return false }
        let oldest = admitted[admittedHead]
        guard let candidate = candidates[ExactPath(oldest.path)], now - oldest.first >= holdLimit, candidate.since > candidate.first else {
            return false
        }
        admittedHead += 1
        givenUp += 1
        missedSome = true  // a later scan meets it again
        forget(oldest.path)
        return true
    }

    /// Drops stale entries at the front, and the dropped part of the array once it is half;
    /// with nothing left waiting, the tables' storage too (a burst of files leaves nothing held).
    private mutating func dropStaleFront() {
        while head < waits.count && !isLive(waits[head]) { head += 1 }
        if candidates.isEmpty {
            admitted = []
            admittedHead = 0
        } else if admittedHead > 1024 && admittedHead * 2 > admitted.count {
            admitted.removeFirst(admittedHead)  // given-up and handed-over entries at the front
            admittedHead = 0
        } else if admitted.count - admittedHead > 2 * candidates.count + 1024 {
            admitted = admitted[admittedHead...].filter { candidates[ExactPath($0.path)]?.first == $0.first }
            admittedHead = 0
        }
        if head == waits.count {
            waits.removeAll(keepingCapacity: waits.capacity <= 4096)
            head = 0
            if candidates.capacity > 4096 { candidates = [:] }
        } else if head > 1024 && head * 2 > waits.count {
            waits.removeFirst(head)
            head = 0
        } else if waits.count - head > 2 * candidates.count + 1024 {
            // Waits restarted behind a live front (files still being written, seen again at
            // each scan) leave stale entries the front never reaches: keep the live ones.
            waits = waits[head...].filter { isLive($0) }
            head = 0
        }
    }
}
