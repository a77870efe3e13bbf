import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// The HTTP API's own threads run at a lower scheduling priority than the engine's: `serve`
/// exists to move data, and watching it must not slow it (bench/api). When the cores are short,
/// the runs' threads come first and the API waits (its latency grows); when they are not, the
/// API runs as fast as before. `APIThreads.niceIncrement` is added to the nice value of each
/// event-loop thread of the HTTP server and of each `APIWorkers` thread, once, as it starts:
/// these threads do nothing else. (Raising a thread's priority back needs privileges, so the
/// shared threads of Swift's cooperative pool are left alone; the API's heavy work, store reads
/// and encoding answers, runs on `APIWorkers`.)
enum APIThreads {
    static let niceIncrement: Int32 = 10

    /// Lowers the calling thread's priority by `niceIncrement` (Linux: a thread is a task with
    /// a nice value of its own).
    static func lowerCurrentThreadPriority() {
        #if os(Linux)
        guard let thread = currentThreadID() else { return }
        errno = 0
        let current = getpriority(__priority_which_t(PRIO_PROCESS.rawValue), thread)
        guard errno == 0 else { return }
        _ = setpriority(__priority_which_t(PRIO_PROCESS.rawValue), thread, min(current + niceIncrement, 19))
        #endif
    }

    /// Names the calling thread as `ps -L` and /proc show it (at most 15 bytes): Foundation's
    /// `Thread.name` does not reach the kernel on Linux. (A name cut inside a character is
    /// repaired, not a trap.)
    static func nameCurrentThread(_ name: String) {
        try? String(decoding: name.utf8.prefix(15), as: UTF8.self).write(toFile: "/proc/thread-self/comm", atomically: false, encoding: .utf8)
    }

    /// The kernel's id of the calling thread, from `/proc/thread-self` ("PID/task/TID"): Swift
    /// does not see glibc's `gettid` without _GNU_SOURCE, nor the variadic `syscall`.
    static func currentThreadID() -> id_t? {
        var target = [CChar](repeating: 0, count: 64)
        let length = readlink("/proc/thread-self", &target, target.count - 1)
        guard length > 0 else { return nil }
        let text = String(decoding: target[0..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return text.split(separator: "/").last.flatMap { id_t($0) }
    }
}

/// A few threads of the API's own, at the API's priority, for blocking work: store reads (SQLite
/// or libpq calls that may wait on disk or network) and encoding their answers. Work is taken in
/// the order given.
///
/// ```swift
/// let workers = APIWorkers(count: 4)
/// let runs = try await workers.run { try store.listRuns(filter) }
/// ```
final class APIWorkers: @unchecked Sendable {
    private let condition = NSCondition()
    private var queued: [@Sendable () -> Void] = []  // guarded by condition
    private var head = 0

    init(count: Int, name: String = "http-api") {
        for index in 0..<count {
            let thread = Thread { [self] in
                APIThreads.nameCurrentThread("\(name)-\(index)")
                APIThreads.lowerCurrentThreadPriority()
                work()
            }
            thread.start()
        }
    }

    /// Runs `job` on one of the threads and returns what it returns (or throws what it throws).
    func run<T: Sendable>(_ job: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            enqueue { continuation.resume(with: Result { try job() }) }
        }
    }

    private func enqueue(_ job: @escaping @Sendable () -> Void) {
        condition.lock()
        queued.append(job)
        condition.unlock()
        condition.signal()
    }

    private func work() {
        while true {
            condition.lock()
            while head == queued.count { condition.wait() }
            let job = queued[head]
            head += 1
            if head == queued.count || head > 1024 {  // keep the array short without O(n) per take
                queued.removeFirst(head)
                head = 0
            }
            condition.unlock()
            job()
        }
    }
}
