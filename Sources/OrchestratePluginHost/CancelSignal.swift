#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import OrchestrateLock

/// The cancellation state of one step call: a flag for polling (is_cancelled) and a pipe whose
/// read end becomes readable at cancellation (cancel_fd), so a plugin blocked in poll() on a
/// socket wakes at once, and so `sleep_ms` is a poll() on that same pipe.
///
/// The pipe is made on first use (`descriptor()`): most steps never ask for it, and making and
/// closing one costs six system calls, more than a no-op step's whole call. One byte is written
/// at the first `cancel` (or at creation, if cancelled already) and never read, so the fd stays
/// readable. The pipe is close-on-exec: children a plugin spawns (exec) do not inherit it.
final class CancelSignal: @unchecked Sendable {
    private let lock = Lock()
    private var storedReason: CancelReason?
    /// -2: not made yet; -1: could not be made (out of descriptors: polling only).
    private var readFD: Int32 = -2
    private var writeFD: Int32 = -1

    init() {}

    deinit {
        if readFD >= 0 { close(readFD) }
        if writeFD >= 0 { close(writeFD) }
    }

    /// The read end of the pipe (cancel_fd), made now if it was not yet; -1 when no pipe can be
    /// made (the plugin then polls is_cancelled).
    func descriptor() -> Int32 {
        lock.withLock {
            if readFD == -2 { makePipe() }
            return readFD
        }
    }

    /// Called with `lock` held.
    private func makePipe() {
        var fds: [Int32] = [-1, -1]
        // pipe + fcntl rather than pipe2 (a GNU extension Glibc's Swift module hides). In the
        // short window before FD_CLOEXEC is set, a child spawned by another thread could
        // inherit the fds; that only leaks two descriptors into that child.
        guard pipe(&fds) == 0 else {
            readFD = -1
            return
        }
        for fd in fds {
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
            _ = fcntl(fd, F_SETFL, O_NONBLOCK)
        }
        readFD = fds[0]
        writeFD = fds[1]
        if storedReason != nil { markReadable() }
    }

    private func markReadable() {
        var byte: UInt8 = 1
        _ = write(writeFD, &byte, 1)
    }

    /// The first reason given wins; later calls do nothing.
    func cancel(_ reason: CancelReason) {
        lock.withLock {
            guard storedReason == nil else { return }
            storedReason = reason
            if writeFD >= 0 { markReadable() }
        }
    }

    var reason: CancelReason? { lock.withLock { storedReason } }
    var isCancelled: Bool { reason != nil }

    /// Waits up to `milliseconds` (0 or less: just checks); returns true when cancelled.
    func wait(milliseconds: Int64) -> Bool {
        let deadline = MonotonicClock.nowMilliseconds() + max(0, milliseconds)
        while true {
            if isCancelled { return true }
            let remaining = deadline - MonotonicClock.nowMilliseconds()
            if remaining <= 0 { return false }
            let slice = Int32(min(remaining, 60_000))
            let fd = descriptor()
            if fd >= 0 {
                var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
                _ = poll(&pfd, 1, slice)
            } else {
                usleep(UInt32(min(slice, 50)) * 1000)
            }
        }
    }
}
