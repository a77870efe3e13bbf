import Hummingbird
import HTTPTypes
import NIOConcurrencyHelpers

/// HEAD on any GET route: answered as the GET, headers only (an event stream is not opened).
/// In front of the router, which matches a route by its method before any middleware runs.
struct HeadResponder<Router: HTTPResponder<APIContext>>: HTTPResponder {
    typealias Context = APIContext
    let router: Router

    func respond(to request: Request, context: APIContext) async throws -> Response {
        guard request.method == .head else { return try await router.respond(to: request, context: context) }
        var head = request.head
        head.method = .get
        var context = context
        context.isHead = true
        return try await router.respond(to: Request(head: head, body: request.body), context: context).createHeadResponse()
    }
}

/// A known path asked with a method it does not take: 405 with `Allow` (RFC 9110 15.5.6),
/// rather than the router's 404. The routes are read from the router once they are all added.
final class MethodTable: Sendable {
    private let routes = NIOLockedValueBox<[(components: [Substring], method: HTTPRequest.Method)]>([])

    func load(_ router: Router<APIContext>) {
        let table = router.routes.map { route in
            (components: route.path.description.split(separator: "/"), method: route.method)
        }
        routes.withLockedValue { $0 = table }
    }

    /// The methods `path` is routed for (HEAD wherever GET is); empty for an unknown path.
    /// The router resolves a path to one route pattern before it looks at the method, preferring
    /// a literal segment to a parameter, position by position (`/api/queues/rate` rather than
    /// `/api/queues/{segment}`): only that pattern's methods are the path's.
    func methods(for path: String) -> [String] {
        let parts = path.split(separator: "/")
        var best: [Int] = []
        var methods = Set<String>()
        for route in routes.withLockedValue({ $0 }) where route.components.count == parts.count {
            var rank: [Int] = []
            for (pattern, part) in zip(route.components, parts) {
                if pattern == part && !Self.isParameter(pattern) {
                    rank.append(2)
                } else if Self.isParameter(pattern) {
                    rank.append(1)
                } else {
                    rank = []
                    break
                }
            }
            guard rank.count == parts.count, !rank.lexicographicallyPrecedes(best) else { continue }
            if rank != best {
                best = rank
                methods = []
            }
            methods.insert(route.method.rawValue)
            if route.method == .get { methods.insert("HEAD") }
        }
        return methods.sorted()
    }

    private static func isParameter(_ pattern: Substring) -> Bool {
        pattern.hasPrefix("{") || pattern.hasPrefix(":") || pattern == "*"
    }
}

struct MethodMiddleware: RouterMiddleware {
    typealias Context = APIContext
    let table: MethodTable

    func handle(_ request: Request, context: APIContext,
                next: (Request, APIContext) async throws -> Response) async throws -> Response
    {
        let allowed = table.methods(for: request.uri.path)
        // `HeadResponder` has made a HEAD a GET by now.
        if !allowed.isEmpty && !allowed.contains(request.method.rawValue) {
            var response = Problem(.methodNotAllowed, "\(request.uri.path) takes \(allowed.joined(separator: ", ")), "
                                   + "not \(request.method.rawValue)").response
            response.headers[.allow] = allowed.joined(separator: ", ")
            return response
        }
        return try await next(request, context)
    }
}
