import ArgumentParser
import OrchestrateTokenBucket

/// `--max-rate` and `queue rate`: a rate (bytes per second as curl's `--limit-rate`: `500K`,
/// `10M`, `1.5G`; `0` or `off` for no cap) or a timetable in rclone's `--bwlimit` form
/// (`"Mon-Fri 08:00,10M 19:00,off"`), read by `RateTimetable`.
enum MaxRateOption {
    /// For `@Option(transform:)`: a refusal names the entry to change.
    static func parse(_ text: String) throws -> RateTimetable {
        do {
            return try RateTimetable.parse(text)
        } catch {
            throw ValidationError(error.description)
        }
    }

    /// The help text shared by the commands that take `--max-rate`.
    static func help(_ scope: String) -> ArgumentHelp {
        ArgumentHelp("Bandwidth cap for \(scope): bytes per second with an optional K, M or G suffix (powers of 1024, as curl's "
            + "--limit-rate: 500K, 10M, 1.5G; 0 or off: none), or a timetable as rclone's --bwlimit: "
            + "\"Mon-Fri 08:00,10M 19:00,off\" (the cap changes at those local times, on running transfers too).",
            valueName: "rate")
    }
}
