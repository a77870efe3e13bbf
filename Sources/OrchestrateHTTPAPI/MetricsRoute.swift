import Hummingbird
import HTTPTypes

/// `GET /metrics`: the Prometheus text format, behind the bearer token like every request
/// (Prometheus sends a read-only token with `authorization: {credentials_file: ...}`).
enum MetricsRoute {
    static func add(to router: Router<APIContext>, services: APIServices, metrics: ServeMetrics) {
        router.get("/metrics") { _, _ in
            try await services.blocking { try metrics.refreshGauges(from: services.store) }
            var headers = HTTPFields()
            headers[.contentType] = "text/plain; version=0.0.4; charset=utf-8"
            return Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(string: metrics.text())))
        }
    }
}
