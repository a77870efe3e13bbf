import Foundation
import OrchestrateEngine
import OrchestrateLock

/// Run ids: sortable by creation time, short enough to type, unique without coordination.
///
/// The time is to the second, so the random part must keep apart the runs of one second: a
/// `submit --batch` of 10,000 runs makes them all in a second or two, and with 6 letters of 32
/// two of them shared an id about one batch in twenty (the batch then failed whole). A process
/// never repeats an id within a second; between processes, eight letters make 10,000 ids of
/// one second collide about once in 20,000 such seconds.
public enum RunIDs {
    private static let alphabet = Array("abcdefghijkmnpqrstuvwxyz23456789")
    /// The ids this process made in the second it made its last one (guarded by `lock`).
    nonisolated(unsafe) private static var madeThisSecond: (stamp: String, ids: Set<String>) = ("", [])
    private static let lock = Lock()

    public static func make(now: Date = Date()) -> String {
        var time = time_t(now.timeIntervalSince1970)
        var parts = tm()
        gmtime_r(&time, &parts)
        let stamp = String(format: "%04d%02d%02d-%02d%02d%02d", parts.tm_year + 1900, parts.tm_mon + 1, parts.tm_mday,
                           parts.tm_hour, parts.tm_min, parts.tm_sec)
        return lock.withLock {
            if madeThisSecond.stamp != stamp { madeThisSecond = (stamp, []) }
            while true {
                let id = "\(stamp)-\(String((0..<8).map { _ in alphabet.randomElement()! }))"
                if madeThisSecond.ids.insert(id).inserted { return id }
            }
        }
    }
}
