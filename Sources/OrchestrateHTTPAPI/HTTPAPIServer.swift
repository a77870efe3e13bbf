import Foundation
import Hummingbird
import HummingbirdCore
import HummingbirdTLS
import Logging
import NIOCore
import NIOPosix
import OrchestratePluginHost
import OrchestrateStore

/// The HTTP API of `serve --http ADDR`, in the `serve` process, on its own event loops.
///
/// ```swift
/// let server = try HTTPAPIServer.start(HTTPAPIServer.Configuration(address: address, tokens: tokens),
///                                      store: store, registry: registry, stateDirectory: dir, metrics: metrics)
/// print(server.baseURL)
/// ```
public enum HTTPAPIServer {
    public struct Configuration: Sendable {
        public var address: ListenAddress
        public var tokens: APITokens
        /// PEM files; both or neither.
        public var tlsCertificate: String?
        public var tlsKey: String?
        /// At most this many event streams open at once (each polls the store).
        public var maxEventStreams = 64
        /// At most this many requests (event streams aside) are worked on at once, and this many
        /// wait for their turn; more are answered 503 with Retry-After (`RequestAdmission`).
        public var maxActiveRequests = 4
        public var maxWaitingRequests = 64
        /// Connections and their deadlines (`ConnectionGuard`).
        public var connections = ConnectionLimits()
        /// With it, `POST /api/runs` starts only the workflows in this directory, by name
        /// (`APIWorkflows`); without it, any workflow file or YAML text.
        public var workflowDirectory: String?

        public init(address: ListenAddress, tokens: APITokens, tlsCertificate: String? = nil, tlsKey: String? = nil) {
            self.address = address
            self.tokens = tokens
            self.tlsCertificate = tlsCertificate
            self.tlsKey = tlsKey
        }
    }

    public struct StartError: Error, CustomStringConvertible {
        public let description: String
    }

    /// Where the server listens.
    public struct Running: Sendable {
        /// `http://127.0.0.1:8080` (the port actually bound, when 0 was asked).
        public let baseURL: String
        /// The connection cap in force: the one asked for, or half the descriptor limit if lower.
        public let maxConnections: Int
    }

    /// Binds and starts serving in the background; returns once it accepts connections, or
    /// throws (address in use, unreadable certificate…).
    public static func start(_ configuration: Configuration, store: any StateStore, registry: PluginRegistry,
                             stateDirectory: String, metrics: ServeMetrics) throws -> Running
    {
        let services = APIServices(store: store, registry: registry, stateDirectory: stateDirectory,
                                   maxStreams: configuration.maxEventStreams,
                                   workerThreads: configuration.maxActiveRequests + 2,
                                   workflows: configuration.workflowDirectory.map { APIWorkflows(directory: $0) })
        let router = Router(context: APIContext.self)
        let methods = MethodTable()
        router.add(middleware: ProblemMiddleware())
        router.add(middleware: BearerAuthMiddleware(tokens: configuration.tokens))
        router.add(middleware: MethodMiddleware(table: methods))
        router.add(middleware: AdmissionMiddleware(admission: RequestAdmission(maxActive: configuration.maxActiveRequests,
                                                                               maxWaiting: configuration.maxWaitingRequests)))
        router.add(middleware: ReadCacheInvalidation(cache: services.readCache))
        RunRoutes.add(to: router, services: services)
        EventStream.add(to: router, services: services)
        JournalRoute.add(to: router, services: services)
        ScheduleRoutes.add(to: router, services: services)
        CatalogRoutes.add(to: router, services: services)
        MetricsRoute.add(to: router, services: services, metrics: metrics)
        router.get("/api/openapi.json") { _, _ in OpenAPIDocument.response() }
        DashboardRoutes.add(to: router)
        methods.load(router)

        // Every connection is counted and held to its deadlines (`ConnectionGuard`), at most
        // half the descriptor limit of them.
        let limits = {
            var limits = configuration.connections
            limits.maxConnections = ConnectionLimits.connectionCap(requested: limits.maxConnections)
            return limits
        }()
        let table = ConnectionTable(capacity: limits.maxConnections)
        let http1 = HTTP1Channel.Configuration(additionalChannelHandlers: [ConnectionGuard(table: table, limits: limits)])
        let server: HTTPServerBuilder
        if let cert = configuration.tlsCertificate, let key = configuration.tlsKey {
            do {
                let certificates = try NIOSSLCertificate.fromPEMFile(cert)
                let privateKey = try NIOSSLPrivateKey(file: key, format: .pem)
                var tls = TLSConfiguration.makeServerConfiguration(certificateChain: certificates.map { .certificate($0) },
                                                                   privateKey: .privateKey(privateKey))
                // Not NIOSSL's default of TLS 1.0: tokens do not travel over 1.0 or 1.1 (RFC 8996).
                tls.minimumTLSVersion = .tlsv12
                server = try .tls(.http1(configuration: http1), tlsConfiguration: tls)
            } catch {
                throw StartError(description: "--tls-cert \(cert) / --tls-key \(key): \(error)")
            }
        } else {
            server = .http1(configuration: http1)
        }
        let scheme = configuration.tlsCertificate == nil ? "http" : "https"

        // Event loops of the server's own, at the API's lower priority (`APIThreads`).
        let eventLoops = MultiThreadedEventLoopGroup(numberOfThreads: System.coreCount)
        for loop in eventLoops.makeIterator() {
            try loop.submit { APIThreads.lowerCurrentThreadPriority() }.wait()
        }
        let logger = Logger(label: "orchestrate-http") { ServerLogHandler(label: $0, level: .warning) }
        let started = StartSignal()
        let address = configuration.address
        let app = Application(
            responder: HeadResponder(router: router.buildResponder()), server: server,
            configuration: .init(address: .hostname(address.host, port: address.port), serverName: "orchestrate",
                                 availableConnectionsDelegate: AcceptedSocketBound(capacity: limits.maxConnections)),
            onServerRunning: { channel in
                started.finish(.success(channel.localAddress?.port ?? address.port))
            },
            eventLoopGroupProvider: .shared(eventLoops),
            logger: logger)
        Task.detached {
            do {
                try await app.run()
                started.finish(.failure(StartError(description: "the HTTP server stopped")))
            } catch {
                started.finish(.failure(StartError(description: "cannot serve HTTP on \(address): \(error)")))
            }
        }
        let port = try started.wait()
        return Running(baseURL: "\(scheme)://\(address.hostForURL):\(port)", maxConnections: limits.maxConnections)
    }
}

/// Hands the outcome of starting from the server's task to the thread waiting in `start`.
private final class StartSignal: @unchecked Sendable {
    private let condition = NSCondition()
    private var result: Result<Int, any Error>?

    func finish(_ outcome: Result<Int, any Error>) {
        condition.lock()
        if result == nil { result = outcome }
        condition.broadcast()
        condition.unlock()
    }

    func wait() throws -> Int {
        condition.lock()
        defer { condition.unlock() }
        while result == nil { condition.wait() }
        return try result!.get()
    }
}

/// `HOST:PORT` as given to `--http`: `127.0.0.1:8080`, `localhost:0`, `[::1]:8080`, `0.0.0.0:8080`.
public struct ListenAddress: Sendable, CustomStringConvertible {
    public let host: String
    public let port: Int

    public init(parsing text: String) throws {
        guard let colon = text.lastIndex(of: ":"), let port = Int(text[text.index(after: colon)...]), (0...65535).contains(port) else {
            throw HTTPAPIServer.StartError(description: "--http takes HOST:PORT (e.g. 127.0.0.1:8080), not '\(text)'")
        }
        var host = String(text[..<colon])
        if host.hasPrefix("[") && host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        guard !host.isEmpty else { throw HTTPAPIServer.StartError(description: "--http \(text): give a host, e.g. 127.0.0.1:\(port)") }
        self.host = host
        self.port = port
    }

    /// Only this machine can connect (but every local user can: hence the token).
    public var isLoopback: Bool { host == "localhost" || host == "::1" || host.hasPrefix("127.") }

    var hostForURL: String { host.contains(":") ? "[\(host)]" : host }
    public var description: String { "\(hostForURL):\(port)" }
}
