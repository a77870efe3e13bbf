import Hummingbird
import HTTPTypes
import OrchestrateJSON

/// An error answered as an RFC 9457 problem document (`application/problem+json`).
struct Problem: Error {
    let status: HTTPResponse.Status
    let detail: String
    /// Extra members, e.g. `errors` (the FILE:LINE:COL diagnostics of a rejected workflow).
    var extra: [String: JSONValue] = [:]
    /// Seconds to wait before trying again (`Retry-After`), for a 503.
    var retryAfter: Int?

    init(_ status: HTTPResponse.Status, _ detail: String, extra: [String: JSONValue] = [:], retryAfter: Int? = nil) {
        self.status = status
        self.detail = detail
        self.extra = extra
        self.retryAfter = retryAfter
    }

    var response: Response {
        var body = extra
        body["type"] = "about:blank"  // the status says it all; no problem types of our own yet
        body["title"] = .string(status.reasonPhrase)
        body["status"] = .int(Int64(status.code))
        body["detail"] = .string(detail)
        var headers = HTTPFields()
        headers[.contentType] = "application/problem+json"
        if status == .unauthorized { headers[.wwwAuthenticate] = "Bearer realm=\"orchestrate\"" }
        if let retryAfter { headers[.retryAfter] = "\(retryAfter)" }
        return Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(string: JSONValue.object(body).jsonText)))
    }
}

/// Turns every error a route throws into a problem document: ours as they are, Hummingbird's
/// (404 for unknown paths, 413 for an oversized body…) with their status, anything else as 500
/// without internals.
struct ProblemMiddleware: RouterMiddleware {
    typealias Context = APIContext

    func handle(_ request: Request, context: APIContext,
                next: (Request, APIContext) async throws -> Response) async throws -> Response
    {
        do {
            return try await next(request, context)
        } catch let problem as Problem {
            return problem.response
        } catch let error as any HTTPResponseError {
            let detail = error.status == .notFound ? "no such resource: \(request.uri.path)"
                : error.status == .contentTooLarge ? "the request body is larger than \(APIContext.maxBodySize) bytes"
                : "\(error.status.reasonPhrase)"
            return Problem(error.status, detail).response
        } catch {
            context.logger.error("\(request.method) \(request.uri.path): \(error)")
            return Problem(.internalServerError, "the server failed; see its log").response
        }
    }
}

/// JSON success responses.
enum JSONResponse {
    static func make(_ value: JSONValue, status: HTTPResponse.Status = .ok) -> Response {
        make(body: ByteBuffer(bytes: value.jsonBytes), status: status)
    }

    /// An answer already encoded (a `ReadCache` hit).
    static func make(body: ByteBuffer, status: HTTPResponse.Status = .ok) -> Response {
        var headers = HTTPFields()
        headers[.contentType] = "application/json"
        return Response(status: status, headers: headers, body: .init(byteBuffer: body))
    }
}
