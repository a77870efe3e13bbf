import Foundation

/// A child started with posix_spawn, its output going to files: for long-running tools that start
/// daemons of their own (sshd, the sandbox). Foundation's `Process` with pipes would wait for
/// every process that inherited a pipe end, and its child monitor can block on other children.
public struct SpawnedChild {
    public let pid: pid_t

    /// Starts `arguments[0]` (a path) with `arguments`, stdin from /dev/null, stdout and stderr
    /// appended to the given files, and the current environment plus `environment`.
    public init(_ arguments: [String], stdout: String, stderr: String, environment: [String: String] = [:]) throws {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, stdout, O_WRONLY | O_CREAT | O_APPEND, 0o600)
        posix_spawn_file_actions_addopen(&actions, 2, stderr, O_WRONLY | O_CREAT | O_APPEND, 0o600)
        // Nothing else of the test process: a file another test has open for writing (a binary
        // being copied) would stay open in this child and make its exec fail with ETXTBSY.
        closeInheritedFiles(&actions)
        var env = ProcessInfo.processInfo.environment
        for (key, value) in environment { env[key] = value }
        let argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) } + [nil]
        let envp: [UnsafeMutablePointer<CChar>?] = env.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { for p in argv + envp { free(p) } }
        var child: pid_t = 0
        let rc = posix_spawn(&child, arguments[0], &actions, nil, argv, envp)
        guard rc == 0 else { throw SpawnFailure(description: "cannot start \(arguments[0]): \(String(cString: strerror(rc)))") }
        pid = child
    }

    /// Waits up to `timeout` seconds: the exit status (128 + N when killed by signal N), or nil
    /// if it was still running (it is then killed with SIGKILL).
    public func wait(timeout: Double) -> Int32? {
        let deadline = Date().addingTimeInterval(timeout)
        while true {
            if let status = poll() { return status }
            if Date() >= deadline {
                kill(pid, SIGKILL)
                var status: Int32 = 0
                waitpid(pid, &status, 0)
                return nil
            }
            usleep(20_000)
        }
    }

    /// The exit status if the child has ended (reaping it), else nil; -1 if it cannot be waited for.
    public func poll() -> Int32? {
        var status: Int32 = 0
        let r = waitpid(pid, &status, WNOHANG)
        if r == pid {
            let signal = status & 0x7f
            return signal == 0 ? (status >> 8) & 0xff : 128 + signal
        }
        return r < 0 ? -1 : nil
    }
}

public struct SpawnFailure: Error, CustomStringConvertible {
    public let description: String
}

/// A child the tests start, kill and wait for, with Foundation `Process`'s names
/// (`processIdentifier`, `isRunning`, `waitUntilExit()`, `terminationStatus`) but spawned with
/// posix_spawn and reaped with waitpid: Foundation's child monitor sometimes never reaps a child
/// killed with SIGKILL (it stays a zombie), and `waitUntilExit()` then hangs the whole suite.
public final class StartedProcess: @unchecked Sendable {
    private let child: SpawnedChild
    private let lock = NSLock()
    private var status: Int32?

    /// Starts `arguments[0]` (a path) with stdin, stdout and stderr on /dev/null.
    public init(_ arguments: [String], environment: [String: String] = [:]) throws {
        child = try SpawnedChild(arguments, stdout: "/dev/null", stderr: "/dev/null", environment: environment)
    }

    public var processIdentifier: Int32 { child.pid }

    public var isRunning: Bool { exitStatus == nil }

    /// The exit status; 128 + N when killed by signal N; -1 while it runs.
    public var terminationStatus: Int32 { exitStatus ?? -1 }

    public func waitUntilExit() {
        while exitStatus == nil { usleep(5_000) }
    }

    private var exitStatus: Int32? {
        lock.withLock {
            if status == nil { status = child.poll() }
            return status
        }
    }
}

/// glibc's `posix_spawn_file_actions_addclosefrom_np` (2.34+), which Swift's Glibc module does
/// not export: looked up at run time.
private typealias AddCloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32
private let addCloseFrom: AddCloseFrom? = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "posix_spawn_file_actions_addclosefrom_np")
    .map { unsafeBitCast($0, to: AddCloseFrom.self) }

/// Closes every descriptor above stderr in the child.
func closeInheritedFiles(_ actions: inout posix_spawn_file_actions_t) {
    if let addCloseFrom {
        _ = addCloseFrom(&actions, 3)
    }
}
