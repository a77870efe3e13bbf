import OrchestrateStore
import OrchestrateTokenBucket

extension RunRecord {
    /// The run's `--max-rate` as one value: a constant rate is journaled in `maxRate` (bytes per
    /// second, as before timetables), a timetable as its text in `maxRateTimetable`. nil: no cap.
    /// A stored timetable that no longer parses (written by a newer version) caps nothing rather
    /// than failing the run.
    public var rateCap: RateTimetable? {
        get {
            if let text = maxRateTimetable { return try? RateTimetable.parse(text) }
            return maxRate.map { RateTimetable(bytesPerSecond: $0) }
        }
        set {
            maxRate = newValue?.constantRate ?? nil
            maxRateTimetable = newValue?.isTimetable == true ? newValue?.text : nil
        }
    }
}
