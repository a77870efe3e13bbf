#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import OrchestratePluginKit

/// Watches a spawned child (the guard, which ends as its command ends) until it exits: feeds its stdin, streams its stdout (info) and
/// stderr (warn) to the step log line by line, and on cancellation sends SIGTERM to its process
/// group, then SIGKILL after the grace period.
///
/// One thread, one poll() loop over the child's pipes, the step's cancel fd and the guard's
/// lifeline (its write end reports POLLERR once the guard, the only reader, has exited: the
/// wake-up for the guard's exit, which comes just after the command's pipes close); the child's
/// exit is checked every pass (at most 100 ms apart) without reaping it, so its process group
/// id cannot be reused before the final SIGKILL to stragglers.
struct ChildSupervisor {
    enum Ending {
        case exited(Int32)
        case signalled(Int32)
        /// Someone else reaped the child (a host-wide SIGCHLD handler): status unknown.
        case lost
    }

    struct Outcome {
        var ending: Ending
        /// The step was cancelled and the process group signalled.
        var stopped: Bool
        /// SIGKILL was needed after the grace period.
        var killed: Bool
        var stdout: OutputCollector
        var stderr: OutputCollector
    }

    let step: StepContext
    let child: SpawnedChild
    let stdinBytes: [UInt8]
    let graceMilliseconds: Int64

    func run() -> Outcome {
        var outcome = Outcome(ending: .lost, stopped: false, killed: false, stdout: OutputCollector(), stderr: OutputCollector())
        var stdoutFD = child.stdoutFD, stderrFD = child.stderrFD, stdinFD = child.stdinFD
        var stdinOffset = 0
        var termSentAt: Int64?
        let cancelFD = step.cancelFD
        var guardExiting = false
        let buffer = UnsafeMutableRawPointer.allocate(byteCount: 64 << 10, alignment: 16)
        defer { buffer.deallocate() }

        func drain(_ fd: inout Int32, into collector: inout OutputCollector, level: LogLevel) {
            while fd >= 0 {
                let n = read(fd, buffer, 64 << 10)
                if n > 0 {
                    collector.append(UnsafeRawBufferPointer(start: buffer, count: n)) { step.log(level, $0) }
                } else if n < 0 && errno == EINTR {
                    continue
                } else if n < 0 && errno == EAGAIN {
                    return
                } else { // end of stream or error
                    close(fd)
                    fd = -1
                }
            }
        }

        while true {
            var fds: [pollfd] = []
            if stdoutFD >= 0 { fds.append(pollfd(fd: stdoutFD, events: Int16(POLLIN), revents: 0)) }
            if stderrFD >= 0 { fds.append(pollfd(fd: stderrFD, events: Int16(POLLIN), revents: 0)) }
            if stdinFD >= 0 { fds.append(pollfd(fd: stdinFD, events: Int16(POLLOUT), revents: 0)) }
            if termSentAt == nil && cancelFD >= 0 { fds.append(pollfd(fd: cancelFD, events: Int16(POLLIN), revents: 0)) }
            if !guardExiting { fds.append(pollfd(fd: child.lifelineFD, events: 0, revents: 0)) }
            // The guard closed its files on its way out; it is a zombie within moments.
            _ = poll(&fds, nfds_t(fds.count), guardExiting ? 1 : 100)
            if !guardExiting, let lifeline = fds.last, lifeline.revents & Int16(POLLERR | POLLHUP) != 0 { guardExiting = true }

            drain(&stdoutFD, into: &outcome.stdout, level: .info)
            drain(&stderrFD, into: &outcome.stderr, level: .warn)
            if stdinFD >= 0 { feedStdin(&stdinFD, offset: &stdinOffset) }

            let now = Clock.milliseconds()
            if termSentAt == nil && step.isCancelled {
                kill(-child.pid, SIGTERM)
                termSentAt = now
                outcome.stopped = true
                step.log(.warn, "cancelled: sent SIGTERM to the command's process group \(child.pid)")
            }
            if let sent = termSentAt, !outcome.killed, now - sent >= graceMilliseconds {
                kill(-child.pid, SIGKILL)
                outcome.killed = true
                step.log(.warn, "the command did not stop within \(graceMilliseconds) ms: sent SIGKILL")
            }
            if hasExited() {
                // Everything the child wrote is in the pipes by now; grandchildren that still
                // hold them open are not waited for.
                drain(&stdoutFD, into: &outcome.stdout, level: .info)
                drain(&stderrFD, into: &outcome.stderr, level: .warn)
                break
            }
        }
        if outcome.stopped { kill(-child.pid, SIGKILL) } // stragglers, while the group id is still ours
        outcome.ending = reap()
        // Only now: the guard kills the group when its lifeline ends.
        for fd in [stdoutFD, stderrFD, stdinFD, child.lifelineFD] where fd >= 0 { close(fd) }
        outcome.stdout.finish { step.log(.info, $0) }
        outcome.stderr.finish { step.log(.warn, $0) }
        return outcome
    }

    /// Writes what the pipe takes now; closes stdin when all is written or the child closed it.
    private func feedStdin(_ fd: inout Int32, offset: inout Int) {
        while offset < stdinBytes.count {
            let n = stdinBytes.withUnsafeBytes { write(fd, $0.baseAddress! + offset, $0.count - offset) }
            if n > 0 { offset += n; continue }
            if n < 0 && errno == EINTR { continue }
            if n < 0 && errno == EAGAIN { return }
            break // EPIPE: the child does not read its stdin (SIGPIPE is blocked on this thread)
        }
        close(fd)
        fd = -1
    }

    /// True once the child has exited; it stays a zombie (WNOWAIT) until `reap`.
    private func hasExited() -> Bool {
        var info = siginfo_t()
        let result = waitid(P_PID, id_t(child.pid), &info, WEXITED | WNOHANG | WNOWAIT)
        if result != 0 { return errno != EINTR } // ECHILD: reaped by someone else
        return info.si_signo == SIGCHLD
    }

    private func reap() -> Ending {
        var status: Int32 = 0
        while waitpid(child.pid, &status, 0) < 0 {
            if errno != EINTR { return .lost }
        }
        let signal = status & 0x7F
        return signal == 0 ? .exited((status >> 8) & 0xFF) : .signalled(signal)
    }
}

enum Clock {
    static func milliseconds() -> Int64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return Int64(ts.tv_sec) * 1000 + Int64(ts.tv_nsec) / 1_000_000
    }
}
