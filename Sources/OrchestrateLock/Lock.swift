#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A plain mutex, the one lock type of the project: the host's modules, a token bucket, the
/// plugin kit's few globals (the step table, built descriptions), and plugins that share state
/// between the threads of a step (`OrchestratePluginKit` re-exports it). Never call back into plugin code
/// while holding one.
///
/// Not `Synchronization.Mutex`: that needs macOS 15 and the package supports macOS 14. The
/// mutex lives on the heap so its address never moves (pthread mutexes must not be copied).
public final class Lock: @unchecked Sendable {
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>

    public init() {
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        pthread_mutex_init(mutex, nil)
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    /// Runs `body` with the mutex held. Keep `body` short.
    public func withLock<T>(_ body: () throws -> T) rethrows -> T {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body()
    }
}
