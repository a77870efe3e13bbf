import Hummingbird
import NIOCore

/// The request context: Hummingbird's basics plus the connection's channel, which the
/// fault injector closes to drop a connection in the middle of a body.
struct SandboxContext: RequestContext {
    var coreContext: CoreRequestContextStorage
    let channel: any Channel

    init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        channel = source.channel
    }

    /// API bodies are small JSON documents.
    var maxUploadSize: Int { 1 << 20 }
}
