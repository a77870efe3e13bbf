import OrchestrateEngine
import OrchestrateLock
import OrchestrateOperations
import OrchestratePluginHost
import OrchestrateStore
import Foundation

/// What the routes work with. The store is synchronous (SQLite or libpq calls that may wait on
/// disk or network): every store call goes through `blocking`, on the API's own worker threads
/// (at the API's lower priority, `APIThreads`), so it never stalls NIO's event loops or Swift's
/// cooperative pool (two threads on a two-core machine).
final class APIServices: Sendable {
    let store: any StateStore
    let registry: PluginRegistry
    let stateDirectory: String
    let maxStreams: Int
    /// `--api-workflows DIR`: the only workflows `POST /api/runs` may start.
    let workflows: APIWorkflows?
    /// Shared by every event stream (one store read for all of them).
    let eventFeed = EventFeed()
    /// Identical reads within a quarter second share one answer.
    let readCache = ReadCache()
    /// Graphs of runs already drawn (a run's workflow never changes).
    let graphs = RunGraph.Cache()
    private let workers: APIWorkers
    private let streamsLock = Lock()
    nonisolated(unsafe) private var streams = 0  // guarded by streamsLock

    /// `workerThreads`: as many as requests may be worked on at once, and a few for the event
    /// streams' reads.
    init(store: any StateStore, registry: PluginRegistry, stateDirectory: String, maxStreams: Int, workerThreads: Int,
         workflows: APIWorkflows?) {
        self.workers = APIWorkers(count: workerThreads)
        self.store = store
        self.registry = registry
        self.stateDirectory = stateDirectory
        self.maxStreams = maxStreams
        self.workflows = workflows
    }

    /// Runs `work` (store calls, and encoding what they read) off the cooperative pool and the
    /// event loops, on the API's worker threads.
    func blocking<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
        try await workers.run(work)
    }

    /// Takes one of the `maxStreams` event-stream slots, or returns false when all are taken.
    func openStream() -> Bool {
        streamsLock.withLock {
            guard streams < maxStreams else { return false }
            streams += 1
            return true
        }
    }

    func closeStream() { streamsLock.withLock { streams -= 1 } }

    var queueControl: QueueControl { QueueControl(store: store, stateDirectory: stateDirectory) }
}
