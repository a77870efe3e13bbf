import Foundation
import Hummingbird
import HTTPTypes
import NIOCore
import OrchestrateJSON
import OrchestrateLock
import OrchestratePluginHost

/// Identical reads within `window` seconds share one answer: a dashboard and Prometheus asking
/// for the same list, detail or scrape at once cost one store read and one encoding (bench/api:
/// 200 requests/s over a handful of distinct URLs). A read asked while the same one is being
/// made waits for it instead of making another.
///
/// An answer is at most `window` old. A change made through the API (any request but GET and
/// HEAD) empties the cache, so a client reads its own writes; changes the engine makes show
/// within `window`, well below what a person watching notices (live progress comes by SSE).
final class ReadCache: @unchecked Sendable {
    let window: Double
    private let lock = Lock()
    private struct Entry {
        let started: Double
        let answer: Task<ByteBuffer, any Error>
    }
    // Guarded by lock.
    private var entries: [String: Entry] = [:]
    /// The keys in the order their answers were started (so the oldest first), with that time:
    /// answers past `window` leave from the front at every read, and once the reads stop, by a
    /// sweep twice `window` later. A client asking many distinct URLs (a query parameter the API
    /// ignores, `?n=1`, `?n=2`…) used to pin a thousand answers of up to a few hundred KB each
    /// for as long as nobody asked for a new one.
    private var order: [(key: String, started: Double)] = []
    private var orderHead = 0
    private var sweepScheduled = false
    /// Answers kept at once, at most: past it a read is made for its asker alone.
    static let maxEntries = 1000

    init(window: Double = 0.25) {
        self.window = window
    }

    /// The JSON answer for `key` (the request's path and query), made by `make` unless an
    /// answer made less than `window` ago, or being made, exists.
    func json(_ key: String, _ make: @escaping @Sendable () async throws -> JSONValue) async throws -> Response {
        try await jsonBytes(key) { try await make().jsonBytes }
    }

    /// `json` for an answer made as JSON text already (UTF-8).
    func jsonBytes(_ key: String, _ make: @escaping @Sendable () async throws -> [UInt8]) async throws -> Response {
        let body = try await answer(key) { ByteBuffer(bytes: try await make()) }
        var response = JSONResponse.make(body: body)
        response.headers[.cacheControl] = "no-store"
        return response
    }

    func answer(_ key: String, _ make: @escaping @Sendable () async throws -> ByteBuffer) async throws -> ByteBuffer {
        let now = MonotonicClock.nowSeconds()
        let (entry, sweep): (Entry?, Bool) = lock.withLock {
            dropStale(now: now)
            if let entry = entries[key], now - entry.started < window { return (entry, false) }
            guard entries.count < Self.maxEntries else { return (nil, false) }
            let entry = Entry(started: now, answer: Task { try await make() })
            entries[key] = entry
            order.append((key, now))
            let sweep = !sweepScheduled
            sweepScheduled = true
            return (entry, sweep)
        }
        if sweep { scheduleSweep() }
        guard let entry else { return try await make() }
        do {
            return try await entry.answer.value
        } catch {
            // A failure (404, store error) is not kept: the next request tries again.
            lock.withLock { if entries[key]?.started == entry.started { entries[key] = nil } }
            throw error
        }
    }

    /// Removes the answers older than `window`, oldest first. Under `lock`.
    private func dropStale(now: Double) {
        while orderHead < order.count, now - order[orderHead].started >= window {
            let (key, started) = order[orderHead]
            if entries[key]?.started == started { entries[key] = nil }
            orderHead += 1
        }
        if orderHead > 1024 && orderHead * 2 > order.count {
            order.removeFirst(orderHead)
            orderHead = 0
        }
    }

    /// Drops stale answers `window` after the last ones were made, until none is left.
    private func scheduleSweep() {
        let window = window
        Task { [weak self] in
            try? await Task.sleep(nanoseconds: UInt64(window * 2 * 1e9))
            guard let self else { return }
            let again: Bool = lock.withLock {
                dropStale(now: MonotonicClock.nowSeconds())
                sweepScheduled = !entries.isEmpty
                return sweepScheduled
            }
            if again { scheduleSweep() }
        }
    }

    /// What identifies a read: its path and query.
    static func key(_ request: Request) -> String { request.uri.path + "?" + (request.uri.query ?? "") }

    /// Forgets every answer (after a change made through the API).
    func invalidate() {
        lock.withLock {
            entries.removeAll()
            order.removeAll()
            orderHead = 0
        }
    }

    /// Answers held now (for tests).
    var count: Int { lock.withLock { entries.count } }
}

/// Empties the read cache after every request that may have changed something.
struct ReadCacheInvalidation: RouterMiddleware {
    typealias Context = APIContext
    let cache: ReadCache

    func handle(_ request: Request, context: APIContext,
                next: (Request, APIContext) async throws -> Response) async throws -> Response
    {
        guard request.method != .get && request.method != .head else { return try await next(request, context) }
        defer { cache.invalidate() }
        return try await next(request, context)
    }
}
