import Foundation
import Hummingbird
import HTTPTypes
import OrchestrateLock

/// Bounds the API requests worked on at once. Past `maxActive` a request waits its turn (first
/// come, first served); past `maxWaiting` waiting ones it is answered at once with 503 and
/// `Retry-After`, so an overloaded server answers quickly that it is busy instead of letting
/// every request's latency grow (bench/api) and taking CPU from the runs it executes.
///
/// Event streams are not counted: they are long-lived and bounded by `maxEventStreams`, and a
/// browser's EventSource gives up for good on a 503. The dashboard's static files are not
/// counted either (they cost nothing). A request's body is read before it is admitted.
final class RequestAdmission: @unchecked Sendable {
    let maxActive: Int
    let maxWaiting: Int
    /// What `Retry-After` says, in seconds.
    let retryAfter = 1
    private let lock = Lock()
    // Guarded by lock.
    private var active = 0
    private var waiting: [CheckedContinuation<Bool, Never>] = []

    init(maxActive: Int, maxWaiting: Int) {
        self.maxActive = maxActive
        self.maxWaiting = maxWaiting
    }

    /// Takes a slot, waiting for one if needed; false when too many already wait.
    func enter() async -> Bool {
        await withCheckedContinuation { continuation in
            enum Admission { case now, later, refused }
            let admission: Admission = lock.withLock {
                if active < maxActive {
                    active += 1
                    return .now
                }
                guard waiting.count < maxWaiting else { return .refused }
                waiting.append(continuation)
                return .later
            }
            switch admission {
            case .now: continuation.resume(returning: true)
            case .refused: continuation.resume(returning: false)
            case .later: break
            }
        }
    }

    /// Gives the slot back: to the longest waiting request, if any.
    func leave() {
        let next: CheckedContinuation<Bool, Never>? = lock.withLock {
            if waiting.isEmpty {
                active -= 1
                return nil
            }
            return waiting.removeFirst()
        }
        next?.resume(returning: true)
    }
}

/// Applies `RequestAdmission` to every request but event streams and the dashboard's files.
struct AdmissionMiddleware: RouterMiddleware {
    typealias Context = APIContext
    let admission: RequestAdmission

    func handle(_ request: Request, context: APIContext,
                next: (Request, APIContext) async throws -> Response) async throws -> Response
    {
        if DashboardRoutes.isAsset(request) || EventStream.isStream(request) { return try await next(request, context) }
        // A request takes a slot only once it has all arrived: a client that sends its body
        // slowly holds its connection (until `ConnectionGuard`'s body deadline), not a slot.
        var request = request
        if request.method != .get && request.method != .head {
            _ = try await request.collectBody(upTo: APIContext.maxBodySize)
        }
        guard await admission.enter() else {
            throw Problem(.serviceUnavailable, "the server is busy (\(admission.maxActive) requests at work, "
                          + "\(admission.maxWaiting) waiting); retry in \(admission.retryAfter) s",
                          retryAfter: admission.retryAfter)
        }
        defer { admission.leave() }
        return try await next(request, context)
    }
}
