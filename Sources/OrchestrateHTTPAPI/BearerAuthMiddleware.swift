import Hummingbird
import HTTPTypes

/// Every request needs `Authorization: Bearer TOKEN`, except that an event stream (exactly its
/// two routes, `EventStream.isStream`) may give the token as `?token=` (a browser's EventSource cannot set headers), and the dashboard's static
/// files need none (they hold no data). A read-only token may only read (GET, HEAD): anything
/// else is 403.
///
/// The token is never taken from a cookie, nor from the URL of a request that changes
/// anything: a form or link on another site can make a browser send cookies and query strings,
/// but not an Authorization header, so it cannot forge a verb (CSRF). No CORS headers are sent,
/// so another site's script cannot send that header either.
struct BearerAuthMiddleware: RouterMiddleware {
    typealias Context = APIContext
    let tokens: APITokens

    func handle(_ request: Request, context: APIContext,
                next: (Request, APIContext) async throws -> Response) async throws -> Response
    {
        if DashboardRoutes.isAsset(request) { return try await next(request, context) }
        guard let presented = Self.presentedToken(request) else {
            throw Problem(.unauthorized, "an Authorization: Bearer TOKEN header is required (the token is in the state directory's http-token file)")
        }
        guard let token = tokens.match(presented) else { throw Problem(.unauthorized, "the bearer token is not valid") }
        if token.access == .read && request.method != .get && request.method != .head {
            throw Problem(.forbidden, "token '\(token.name)' is read-only")
        }
        var context = context
        context.token = token
        return try await next(request, context)
    }

    static func presentedToken(_ request: Request) -> Substring? {
        if let header = request.headers[.authorization] {
            let parts = header.split(separator: " ", maxSplits: 1)
            guard parts.count == 2, parts[0].lowercased() == "bearer" else { return nil }
            return parts[1]
        }
        if EventStream.isStream(request), let token = request.uri.queryParameters.get("token") { return Substring(token) }
        return nil
    }
}
