#if canImport(Glibc)
import Glibc
#endif

/// Runs `body` on a new thread; `join` waits for it. (No Foundation in plugins: it is heavy to load.)
final class Worker: @unchecked Sendable {
    private var thread = pthread_t()
    private let body: () -> Void

    init(_ body: @escaping () -> Void) {
        self.body = body
        let box = Unmanaged.passRetained(self).toOpaque()
        pthread_create(&thread, nil, { raw in
            let worker = Unmanaged<Worker>.fromOpaque(raw!).takeRetainedValue()
            worker.body()
            return nil
        }, box)
    }

    func join() { pthread_join(thread, nil) }
}
