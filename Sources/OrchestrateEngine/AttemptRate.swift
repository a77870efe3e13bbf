/// How many bytes an attempt (or one item of a session) moved, and how fast: measured from
/// where it began, so that bytes already on disk when it resumed (a partial download, a
/// checkpointed upload) count neither as moved nor toward its rate and ETA.
///
/// A fresh attempt measures from its start and from 0 bytes. A resumed one measures from its
/// first progress report: what that report says is done was there before.
struct AttemptRate {
    /// A rate measured over less than this is not shown: the first report's figure (a few
    /// bytes over the connection's set-up) made ETAs like `3485s`.
    static let minimumWindow = 1.0

    private let resumed: Bool
    /// The bytes done when measuring began; nil before the first report.
    private(set) var baseline: Int64?
    /// When measuring began, on the monotonic clock and on the wall clock (journaled as `since`).
    private(set) var since: Double
    private(set) var sinceWall: Double

    init(resumed: Bool, now: Double, wallNow: Double) {
        self.resumed = resumed
        since = now
        sinceWall = wallNow
    }

    /// The bytes moved so far by this attempt, given a report of `bytesDone` in all.
    mutating func moved(_ bytesDone: Int64, now: Double, wallNow: Double) -> Int64 {
        if baseline == nil {
            baseline = resumed ? max(bytesDone, 0) : 0
            if resumed { since = now; sinceWall = wallNow }
        }
        return max(bytesDone - (baseline ?? 0), 0)
    }

    /// Bytes per second moved since measuring began; 0 until `minimumWindow` has passed.
    func rate(moved: Int64, now: Double) -> Double {
        let window = now - since
        return window >= Self.minimumWindow ? Double(moved) / window : 0
    }
}
