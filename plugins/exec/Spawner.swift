#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import CExecSupport
import OrchestratePluginKit

/// A command started by `Spawner` under its guard: the guard's pid (also the process group id
/// of the guard and the command), the command's own pid, and the parent's ends of the
/// command's standard streams (non-blocking, close-on-exec; stdin is -1 when it reads
/// /dev/null) and of the guard's lifeline (close it only after the guard is reaped).
struct SpawnedChild {
    let pid: pid_t
    let commandPID: pid_t
    let stdinFD: Int32
    let stdoutFD: Int32
    let stderrFD: Int32
    let lifelineFD: Int32
}

/// posix_spawn with the settings a step needs: `orchestrate-exec-guard` in a process group of
/// its own, which starts the command in that group (so cancellation can signal everything the
/// command started, and the guard kills it all if this process dies); default signal
/// dispositions and an empty signal mask (the host may ignore SIGPIPE; the command must not
/// inherit that), pipes for the standard streams, and an optional working directory.
enum Spawner {
    /// `argv[0]` is the command as the user wrote it; `executable` the resolved path.
    static func spawn(executable: String, argv arguments: [String], environment: [String], cwd: String?,
                      withStdin: Bool) throws(StepError) -> SpawnedChild
    {
        let guardPath = try GuardLocation.path()
        // Every end is closed when this returns, except the parent's ends handed to the caller.
        var childEnds: [Int32] = [], parentEnds: [Int32] = []
        defer { for fd in childEnds + parentEnds { close(fd) } }
        func newPipe(nonBlockingEnd: Int?, childReads: Bool) throws(StepError) -> (read: Int32, write: Int32) {
            let ends = try makePipe(nonBlockingEnd: nonBlockingEnd)
            childEnds.append(childReads ? ends.read : ends.write)
            parentEnds.append(childReads ? ends.write : ends.read)
            return ends
        }
        let stdinPipe = withStdin ? try newPipe(nonBlockingEnd: 1, childReads: true) : nil
        let stdoutPipe = try newPipe(nonBlockingEnd: 0, childReads: false)
        let stderrPipe = try newPipe(nonBlockingEnd: 0, childReads: false)
        // The guard watches `lifeline.read` for end of file; only this process holds the write end.
        let lifeline = try newPipe(nonBlockingEnd: nil, childReads: true)
        let report = try newPipe(nonBlockingEnd: nil, childReads: false)

        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        if let stdinPipe {
            posix_spawn_file_actions_adddup2(&actions, stdinPipe.read, 0)
        } else {
            posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        }
        posix_spawn_file_actions_adddup2(&actions, stdoutPipe.write, 1)
        posix_spawn_file_actions_adddup2(&actions, stderrPipe.write, 2)
        posix_spawn_file_actions_adddup2(&actions, lifeline.read, 3)
        posix_spawn_file_actions_adddup2(&actions, report.write, 4)
        if let cwd {
            guard let addChdir = addChdirFunction else {
                throw .permanent("cwd is not supported on this system (no posix_spawn_file_actions_addchdir_np)")
            }
            _ = addChdir(&actions, cwd)
        }

        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
        posix_spawnattr_setpgroup(&attributes, 0)
        var emptyMask = sigset_t()
        sigemptyset(&emptyMask)
        posix_spawnattr_setsigmask(&attributes, &emptyMask)
        var defaults = sigset_t()
        sigemptyset(&defaults)
        for signal in [SIGPIPE, SIGINT, SIGQUIT, SIGTERM, SIGHUP, SIGCHLD, SIGUSR1, SIGUSR2, SIGALRM, SIGTSTP, SIGTTIN, SIGTTOU] {
            sigaddset(&defaults, signal)
        }
        posix_spawnattr_setsigdefault(&attributes, &defaults)

        let argv = CStringArray([guardPath, executable] + arguments)
        let envp = CStringArray(environment)
        var pid: pid_t = 0
        let result = posix_spawn(&pid, guardPath, &actions, &attributes, argv.pointers, envp.pointers)
        for fd in childEnds { close(fd) } // the guard has its copies (or failed to start)
        childEnds = []
        guard result == 0 else {
            if result == ENOENT || result == EACCES || result == ENOEXEC {
                throw .permanent("cannot run the exec plugin's process guard \(guardPath): \(String(cString: strerror(result)))",
                                 code: "guard_missing")
            }
            throw .posix("cannot start \(executable) under \(guardPath)", errno: result)
        }
        // Waits until the guard has exec'd the command (or failed to): then a missing
        // interpreter or a bad binary is invalid input, as it would be without a guard.
        let outcome = GuardReport.receive(from: report.read)
        if let failure = outcome.failure(executable: executable) {
            var status: Int32 = 0
            while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
            throw failure
        }
        close(report.read)
        parentEnds = [] // handed over
        return SpawnedChild(pid: pid, commandPID: outcome.commandPID ?? pid, stdinFD: stdinPipe?.write ?? -1,
                            stdoutFD: stdoutPipe.read, stderrFD: stderrPipe.read, lifelineFD: lifeline.write)
    }

    /// A pipe with both ends close-on-exec from the start (the child gets dup2'd copies) and
    /// the parent's end (0 = read, 1 = write) non-blocking. Only the parent's: O_NONBLOCK
    /// belongs to the open file description, which the child's dup2'd copy would share, and most
    /// programs fail on EAGAIN. Both ends are kept above 4, so that no dup2 onto the guard's
    /// descriptors 0-4 overwrites a source still to be copied.
    private static func makePipe(nonBlockingEnd: Int?) throws(StepError) -> (read: Int32, write: Int32) {
        var fds: [Int32] = [-1, -1]
        guard orc_exec_pipe_cloexec(&fds) == 0 else { throw .posix("cannot create a pipe") }
        for index in 0..<2 where fds[index] <= 4 {
            let moved = fcntl(fds[index], F_DUPFD_CLOEXEC, 5)
            if moved >= 0 { close(fds[index]); fds[index] = moved }
        }
        if let end = nonBlockingEnd {
            _ = fcntl(fds[end], F_SETFL, fcntl(fds[end], F_GETFL) | O_NONBLOCK)
        }
        return (fds[0], fds[1])
    }

    private typealias AddChdir = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, UnsafePointer<CChar>) -> Int32

    /// glibc >= 2.29 and macOS have it, but Swift's Glibc module does not expose it.
    private static let addChdirFunction: AddChdir? = {
        #if canImport(Darwin)
        let handle = UnsafeMutableRawPointer(bitPattern: -2) // RTLD_DEFAULT
        #else
        let handle: UnsafeMutableRawPointer? = nil // RTLD_DEFAULT
        #endif
        return dlsym(handle, "posix_spawn_file_actions_addchdir_np").map { unsafeBitCast($0, to: AddChdir.self) }
    }()
}

/// A NULL-terminated array of C strings for argv / envp, freed with the value.
final class CStringArray {
    let pointers: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>
    private let count: Int

    init(_ strings: [String]) {
        count = strings.count
        pointers = .allocate(capacity: strings.count + 1)
        for (index, string) in strings.enumerated() { pointers[index] = strdup(string) }
        pointers[strings.count] = nil
    }

    deinit {
        for index in 0..<count { free(pointers[index]) }
        pointers.deallocate()
    }
}
