import Hummingbird
import NIOCore

/// The OpenAPI 3.1 description of the API, served at `/api/openapi.json`: the file
/// Sources/OrchestrateHTTPAPI/openapi.json, compiled into the binary by SwiftPM's `embedInCode`
/// (as the dashboard's files are) and served byte for byte. Hand-written: when a route changes,
/// change its entry there (OpenAPIConformanceTests holds the server to it with schemathesis, and
/// checks that the served document is the file).
enum OpenAPIDocument {
    static let bytes: [UInt8] = PackageResources.openapi_json

    static func response() -> Response {
        JSONResponse.make(body: ByteBuffer(bytes: bytes))
    }
}
