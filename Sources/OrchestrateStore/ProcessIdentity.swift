// Who owns a run: host name, pid, and the process's start time, so a dead owner can be told
// apart from a live one (and from an unrelated process that got the same pid later).
import Foundation

extension OwnerIdentity {
    /// The identity of the calling process.
    public static let current: OwnerIdentity = {
        let pid = getpid()
        return OwnerIdentity(host: hostName(), pid: pid, startTime: processStartTime(pid) ?? 0)
    }()

    /// True when this identity is a live process on this host. Identities from other hosts
    /// cannot be checked here and count as alive (their lease expiry decides).
    public var isAliveLocally: Bool {
        guard host == OwnerIdentity.current.host else { return true }
        if pid == OwnerIdentity.current.pid { return startTime == OwnerIdentity.current.startTime }
        guard kill(pid, 0) == 0 || errno == EPERM else { return false }
        guard let start = OwnerIdentity.processStartTime(pid) else { return false }
        return startTime == 0 || start == startTime
    }

    static func hostName() -> String {
        var buffer = [CChar](repeating: 0, count: 256)
        guard gethostname(&buffer, buffer.count) == 0 else { return "localhost" }
        return String(decoding: buffer.prefix(while: { $0 != 0 }).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// Field 22 of /proc/PID/stat: the start time in clock ticks since boot. Nil when the
    /// process does not exist (or /proc is not there).
    static func processStartTime(_ pid: Int32) -> Int64? {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8) else { return nil }
        // The command name (field 2) is in parentheses and may contain spaces: split after it.
        guard let close = stat.lastIndex(of: ")") else { return nil }
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        // fields[0] is field 3 (state), so field 22 is fields[19].
        guard fields.count > 19 else { return nil }
        return Int64(fields[19])
    }
}
