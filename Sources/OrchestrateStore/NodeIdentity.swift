// Who owns a run: the node (a machine with its own disks, paths and plugins), and on it the
// process (pid and start time, so a dead owner is told apart from a live one and from an
// unrelated process that got the same pid later).
import Foundation

/// The node this process belongs to: `--node NAME` (which sets `$ORCHESTRATE_NODE`), else the
/// host name. Node names must be unique among the machines sharing a store: a process judges
/// an owner on its own node by its pid, and owners on other nodes by their lease.
public enum NodeName {
    public static let environmentVariable = "ORCHESTRATE_NODE"

    /// Read once, on first use: the CLI sets `$ORCHESTRATE_NODE` before it opens a store.
    public static let current: String = {
        if let name = ProcessInfo.processInfo.environment[environmentVariable], !name.isEmpty { return name }
        return hostName()
    }()

    static func hostName() -> String {
        var buffer = [CChar](repeating: 0, count: 256)
        guard gethostname(&buffer, buffer.count) == 0 else { return "localhost" }
        return String(decoding: buffer.prefix(while: { $0 != 0 }).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}

extension OwnerIdentity {
    /// The identity of the calling process.
    public static let current: OwnerIdentity = {
        let pid = getpid()
        return OwnerIdentity(node: NodeName.current, pid: pid, startTime: processStartTime(pid) ?? 0)
    }()

    /// Whether this owner still holds what it owns, judged the one way every store and command
    /// uses: on this node by its process (alive, not a recycled pid); on another node, which
    /// cannot be looked at from here, by its lease (`leaseValid`, judged by the store's clock).
    public func isLive(leaseValid: Bool) -> Bool {
        node == NodeName.current ? isAliveOnThisNode : leaseValid
    }

    /// True when this identity is a live process on this node.
    var isAliveOnThisNode: Bool {
        if pid == OwnerIdentity.current.pid { return startTime == OwnerIdentity.current.startTime }
        guard kill(pid, 0) == 0 || errno == EPERM else { return false }
        guard let start = OwnerIdentity.processStartTime(pid) else { return false }
        return startTime == 0 || start == startTime
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
