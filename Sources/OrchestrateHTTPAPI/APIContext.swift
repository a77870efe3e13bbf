import Hummingbird
import NIOCore

/// The request context: Hummingbird's basics plus the token the request was authorized with.
struct APIContext: RequestContext {
    var coreContext: CoreRequestContextStorage
    var token: APITokens.Token?
    /// The request's connection: an event stream ends when it closes.
    let connection: any Channel
    /// The request was a HEAD, answered as its GET without the body (`HeadResponder`).
    var isHead = false

    init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        connection = source.channel
    }

    /// Request bodies are bounded: a submitted workflow and its inputs are small.
    static let maxBodySize = 1 << 20
    var maxUploadSize: Int { Self.maxBodySize }
}
