import Hummingbird
import HTTPTypes

/// `GET /metrics`: the Prometheus text format, behind the bearer token like every request
/// (Prometheus sends a read-only token with `authorization: {credentials_file: ...}`).
enum MetricsRoute {
    static func add(to router: Router<APIContext>, services: APIServices, metrics: ServeMetrics) {
        router.get("/metrics") { request, _ in
            let text = try await services.readCache.answer(ReadCache.key(request)) {
                try await services.blocking { try metrics.refreshGauges(from: services.store) }
                return ByteBuffer(string: metrics.text())
            }
            var headers = HTTPFields()
            headers[.contentType] = "text/plain; version=0.0.4; charset=utf-8"
            return Response(status: .ok, headers: headers, body: .init(byteBuffer: text))
        }
    }
}
