import Foundation

/// A shell command in a detached tmux session of 120×30 (or `columns`×30): a real terminal, for what a person at
/// one sees (progress bars, colours) and does (Ctrl-C reaches the foreground process group
/// through the terminal's line discipline). Killed by `close()`.
public struct TmuxSession: Sendable {
    public let name: String
    static let tmux = URL(fileURLWithPath: "/usr/bin/tmux")

    /// Starts `command` (run by bash, so an interrupted child's status is `$?` and the script
    /// goes on) in a new session.
    public init(_ command: String, columns: Int = 120) throws {
        name = "orc-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        let quoted = "'" + command.replacingOccurrences(of: "'", with: "'\\''") + "'"
        // The tmux server this starts daemonises with the descriptors it inherited, and
        // Foundation's Process waits until every holder of its internal descriptor exits. So the
        // client is started through Python's subprocess, which closes inherited descriptors.
        let started = try ChildProcess.run(URL(fileURLWithPath: "/usr/bin/env"), [
            "python3", "-c", "import subprocess, sys; sys.exit(subprocess.call(sys.argv[1:], stdin=subprocess.DEVNULL, "
                + "stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))",
            Self.tmux.path, "new-session", "-d", "-s", name, "-x", "\(columns)", "-y", "30", "exec bash -c \(quoted)",
        ])
        guard started.status == 0 else { throw SpawnFailure(description: "tmux new-session failed: \(started.stderr)") }
    }

    /// The screen as text (`escapes`: with its colour codes; `history`: with what scrolled off).
    public func screen(escapes: Bool = false, history: Bool = false) -> String {
        var args = ["capture-pane", "-p", "-t", name]
        if escapes { args.append("-e") }
        if history { args += ["-S", "-"] }
        return (try? ChildProcess.run(Self.tmux, args).stdout) ?? ""
    }

    /// Types keys, as `tmux send-keys` names them (`C-c` is Ctrl-C).
    public func send(_ keys: String...) throws {
        _ = try ChildProcess.run(Self.tmux, ["send-keys", "-t", name] + keys)
    }

    public func close() { _ = try? ChildProcess.run(Self.tmux, ["kill-session", "-t", name]) }
}
