#if canImport(Glibc)
import Glibc
#endif

/// Runs `body` on a new thread; `join` waits for it. For a step that moves several things at
/// once on threads of its own (share their state with `Lock`). No Foundation: plugins load
/// without it.
public final class Worker: @unchecked Sendable {
    private var thread = pthread_t()
    private let body: () -> Void

    public init(_ body: @escaping () -> Void) {
        self.body = body
        let box = Unmanaged.passRetained(self).toOpaque()
        pthread_create(&thread, nil, { raw in
            let worker = Unmanaged<Worker>.fromOpaque(raw!).takeRetainedValue()
            worker.body()
            return nil
        }, box)
    }

    public func join() { pthread_join(thread, nil) }
}
