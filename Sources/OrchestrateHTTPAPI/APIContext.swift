import Hummingbird
import NIOCore

/// The request context: Hummingbird's basics plus the token the request was authorized with.
struct APIContext: RequestContext {
    var coreContext: CoreRequestContextStorage
    var token: APITokens.Token?

    init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
    }

    /// Request bodies are bounded: a submitted workflow and its inputs are small.
    static let maxBodySize = 1 << 20
    var maxUploadSize: Int { Self.maxBodySize }
}
