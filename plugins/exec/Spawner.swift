#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import OrchestratePluginKit

/// A child started by `Spawner`: its pid (also its process group id) and the parent's ends of
/// its standard streams (non-blocking, close-on-exec; stdin is -1 when it reads /dev/null).
struct SpawnedChild {
    let pid: pid_t
    let stdinFD: Int32
    let stdoutFD: Int32
    let stderrFD: Int32
}

/// posix_spawn with the settings a step needs: a process group of its own (so cancellation
/// can signal everything the command started), default signal dispositions and an empty signal
/// mask (the host may ignore SIGPIPE; the command must not inherit that), pipes for the
/// standard streams, and an optional working directory.
enum Spawner {
    /// `argv[0]` is the command as the user wrote it; `executable` the resolved path.
    static func spawn(executable: String, argv arguments: [String], environment: [String], cwd: String?,
                      withStdin: Bool) throws(StepError) -> SpawnedChild
    {
        let stdinPipe = withStdin ? try makePipe(nonBlockingEnd: 1) : nil
        let stdoutPipe = try makePipe(nonBlockingEnd: 0)
        let stderrPipe = try makePipe(nonBlockingEnd: 0)
        defer {
            // The child's ends: the child has its own copies once spawned (or failed).
            if let stdinPipe { close(stdinPipe.read) }
            close(stdoutPipe.write)
            close(stderrPipe.write)
        }

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

        let argv = CStringArray(arguments)
        let envp = CStringArray(environment)
        var pid: pid_t = 0
        let result = posix_spawn(&pid, executable, &actions, &attributes, argv.pointers, envp.pointers)
        guard result == 0 else {
            if let stdinPipe { close(stdinPipe.write) }
            close(stdoutPipe.read)
            close(stderrPipe.read)
            if result == ENOENT || result == EACCES || result == ENOEXEC {
                throw .invalidInput("cannot run \(executable): \(String(cString: strerror(result)))", code: "command_not_runnable")
            }
            throw .posix("cannot start \(executable)", errno: result)
        }
        return SpawnedChild(pid: pid, stdinFD: stdinPipe?.write ?? -1, stdoutFD: stdoutPipe.read, stderrFD: stderrPipe.read)
    }

    /// A pipe with both ends close-on-exec (the child gets dup2'd copies) and the parent's end
    /// (0 = read, 1 = write) non-blocking. Only the parent's: O_NONBLOCK belongs to the open file
    /// description, which the child's dup2'd copy would share, and most programs fail on EAGAIN.
    private static func makePipe(nonBlockingEnd: Int) throws(StepError) -> (read: Int32, write: Int32) {
        var fds: [Int32] = [-1, -1]
        guard pipe(&fds) == 0 else { throw .posix("cannot create a pipe") }
        for fd in fds { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
        _ = fcntl(fds[nonBlockingEnd], F_SETFL, fcntl(fds[nonBlockingEnd], F_GETFL) | O_NONBLOCK)
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
