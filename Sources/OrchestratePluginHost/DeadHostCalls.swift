#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import OrchestrateLock

/// Remembers the `orc_host *` of calls that have returned, so that a plugin calling back through
/// one (a thread it started still running after `run` returned, which the header forbids) is
/// named in a warning instead of being ignored in silence: the call is still ignored, but the
/// author learns which step type misbehaves. One warning per step type per process, because a
/// stray thread usually calls many times (progress in a loop) and one line says it all.
///
/// Only recent calls are remembered (`capacity`): a late callback comes within moments of the
/// return, and the table must not grow with every step a long `serve` runs. Handles are never
/// reused (`CallContext.begin`), so a dead one stays dead.
enum DeadHostCalls {
    static let capacity = 4096

    /// The warning goes to stderr, like the CLI's other warnings (in `isolation: process` the
    /// runner's stderr reaches the step's log). One write(2), so lines never interleave.
    private static func report(_ message: String) {
        let line = Array("warning: \(message)\n".utf8)
        _ = line.withUnsafeBytes { write(STDERR_FILENO, $0.baseAddress, $0.count) }
    }

    private static let lock = Lock()
    nonisolated(unsafe) private static var stepTypes: [UInt: String] = [:]
    /// The remembered handles, oldest overwritten first (a ring: dropping the oldest of an
    /// array moved the other 4,095 at every step's end).
    nonisolated(unsafe) private static var order = [UInt](repeating: 0, count: capacity)
    nonisolated(unsafe) private static var next = 0
    nonisolated(unsafe) private static var warned: Set<String> = []

    /// The call of step type `stepType` at `host` returned: its pointer is dead from now on.
    static func ended(_ host: UInt, stepType: String) {
        lock.withLock {
            if order[next] != 0 { stepTypes.removeValue(forKey: order[next]) }
            stepTypes[host] = stepType
            order[next] = host
            next = (next + 1) % capacity
        }
    }

    /// A host function was called with `host`, which is not a running call: warns once per
    /// step type when it is a call that has returned. A pointer never handed out says nothing
    /// (there is no step type to name).
    static func calledAfterReturn(_ host: UInt, function: String) {
        let firstForType: String? = lock.withLock {
            guard let stepType = stepTypes[host], warned.insert(stepType).inserted else { return nil }
            return stepType
        }
        guard let stepType = firstForType else { return }
        report("step type '\(stepType)' called the host (\(function)) after its run returned; the call was "
            + "ignored. The plugin breaks the ABI (a thread it started outlives the run call): report it "
            + "to its author. Further such calls from '\(stepType)' are ignored without a warning.")
    }
}
