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
        let entry: Entry = lock.withLock {
            if let entry = entries[key], now - entry.started < window { return entry }
            if entries.count > 1000 { entries = entries.filter { now - $0.value.started < window } }
            let entry = Entry(started: now, answer: Task { try await make() })
            entries[key] = entry
            return entry
        }
        do {
            return try await entry.answer.value
        } catch {
            // A failure (404, store error) is not kept: the next request tries again.
            lock.withLock { if entries[key]?.started == entry.started { entries[key] = nil } }
            throw error
        }
    }

    /// What identifies a read: its path and query.
    static func key(_ request: Request) -> String { request.uri.path + "?" + (request.uri.query ?? "") }

    /// Forgets every answer (after a change made through the API).
    func invalidate() { lock.withLock { entries.removeAll() } }
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
