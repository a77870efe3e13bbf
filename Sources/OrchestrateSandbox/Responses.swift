import Hummingbird
import HTTPTypes
import OrchestrateJSON

/// Small helpers for building responses and reading headers.
enum Responses {
    static func json(_ value: JSONValue, status: HTTPResponse.Status = .ok, headers: HTTPFields = [:]) -> Response {
        var headers = headers
        headers[.contentType] = "application/json"
        return Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(string: value.jsonText)))
    }

    /// A Vimeo-style error document (`error`, `developer_message`).
    static func error(_ status: HTTPResponse.Status, _ message: String, headers: HTTPFields = [:]) -> Response {
        json(["error": .string(message), "developer_message": .string(message)], status: status, headers: headers)
    }

    static func empty(_ status: HTTPResponse.Status, headers: HTTPFields = [:]) -> Response {
        Response(status: status, headers: headers, body: .init())
    }

    /// 503 or 429 with Retry-After, as the fault injector asked.
    static func injected(_ code: Int, retryAfter: String) -> Response {
        var headers = HTTPFields()
        headers[.retryAfter] = retryAfter
        let status: HTTPResponse.Status = code == 429 ? .tooManyRequests : .serviceUnavailable
        return error(status, code == 429 ? "too many requests (injected)" : "service unavailable (injected)", headers: headers)
    }
}

extension HTTPField.Name {
    static let uploadOffset = HTTPField.Name("Upload-Offset")!
    static let uploadLength = HTTPField.Name("Upload-Length")!
    static let tusResumable = HTTPField.Name("Tus-Resumable")!
    static let idempotencyKey = HTTPField.Name("Idempotency-Key")!
}

extension Request {
    /// The body as JSON (API calls are small); null when empty or not JSON.
    func json(_ context: SandboxContext) async -> JSONValue {
        guard let buffer = try? await body.collect(upTo: context.maxUploadSize), buffer.readableBytes > 0 else { return .null }
        return (try? JSONValue(parsing: Array(buffer.readableBytesView))) ?? .null
    }
}
