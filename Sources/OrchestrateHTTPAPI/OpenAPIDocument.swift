import OrchestrateJSON

/// The OpenAPI 3.1 description of the API, served at `/api/openapi.json`. Filled in below.
enum OpenAPIDocument {
    static let json: JSONValue = (try? JSONValue(parsing: text)) ?? ["error": "the OpenAPI document does not parse"]
    static let text = "{}"
}
