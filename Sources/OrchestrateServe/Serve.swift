import Foundation
import OrchestrateEngine
import OrchestrateHTTPAPI
import OrchestrateModel
import OrchestrateOperations
import OrchestratePluginHost
import OrchestrateStore

/// One `orchestrate serve` process, assembled: the queue worker, the schedule firer, the folder
/// watchers, the retention pruner and the HTTP API, started together and stopped together. The
/// CLI parses its flags into a `Configuration` and prints what `Messages` hands it; everything
/// else is here.
///
/// ```swift
/// var configuration = Serve.Configuration(stateDirectory: dir, worker: QueueWorker.Options(maxRuns: 4))
/// configuration.http = Serve.HTTP(address: "127.0.0.1:8080")
/// let serve = try Serve(configuration, store: store, registry: registry, observer: printer, messages: messages)
/// try serve.run()            // until `shutdown()`, from a signal handler
/// ```
public final class Serve: @unchecked Sendable {
    /// The HTTP API's part of the configuration (`serve --http ADDR` and the flags after it).
    public struct HTTP: Sendable {
        /// HOST:PORT.
        public var address: String
        public var tokenFile: String?
        public var tlsCertificate: String?
        public var tlsKey: String?
        /// Plain HTTP on an address other machines reach (a TLS proxy stands in front).
        public var plaintext = false
        public var maxActiveRequests = 4
        public var maxWaitingRequests = 64
        public var maxEventStreams = 64
        public var connections = ConnectionLimits()
        /// `--api-workflows`: the API starts only the workflows of this directory.
        public var workflowDirectory: String?

        public init(address: String) { self.address = address }
    }

    public struct Configuration: Sendable {
        public var stateDirectory: String
        public var worker: QueueWorker.Options
        public var http: HTTP?
        /// Fire registered schedules (`--no-schedules` leaves that to other serve processes).
        public var schedules = true
        /// Prune finished runs past their retention (`--no-prune`).
        public var prune = true
        public var pruneInterval: Double?
        /// The workflows whose `on: watch:` folders this process watches.
        public var watches: [Workflow] = []
        public var watchPollOnly = false

        public init(stateDirectory: String, worker: QueueWorker.Options) {
            self.stateDirectory = stateDirectory
            self.worker = worker
        }
    }

    /// Where the process's lines go (the CLI writes them on stderr: stdout is the event stream).
    public struct Messages: Sendable {
        public var info: @Sendable (String) -> Void
        public var warn: @Sendable (String) -> Void

        public init(info: @escaping @Sendable (String) -> Void, warn: @escaping @Sendable (String) -> Void) {
            self.info = info
            self.warn = warn
        }
    }

    /// A configuration that cannot start: the message says what to change.
    public struct ConfigurationError: Error, CustomStringConvertible {
        public let description: String
    }

    private let messages: Messages
    private let worker: QueueWorker
    private let watchers: [FolderWatcher]
    private let firer: ScheduleFirer?
    private let pruner: RetentionPruner

    /// Checks the watched folders, then starts the HTTP API (their errors are the caller's to
    /// show before anything runs); the worker, firer, watchers and pruner start in `run()`.
    public init(_ configuration: Configuration, store: any StateStore, registry: PluginRegistry,
                observer: any RunObserver, messages: Messages) throws
    {
        self.messages = messages
        // The worker's events feed the counters of `/metrics`.
        let metrics = configuration.http == nil ? nil : ServeMetrics()
        let observer: any RunObserver = metrics.map { RunObservers([observer, $0]) } ?? observer
        // Watches first: a folder that cannot be watched stops the process before it listens.
        watchers = try Self.watchers(configuration, store: store, observer: observer, messages: messages)
        if let http = configuration.http, let metrics {
            try Self.startHTTP(http, stateDirectory: configuration.stateDirectory, store: store, registry: registry,
                               metrics: metrics, messages: messages)
        }
        worker = QueueWorker(store: store, registry: registry, options: configuration.worker, observer: observer)
        if configuration.schedules {
            var options = ScheduleFirer.Options()
            options.warn = messages.warn
            firer = ScheduleFirer(store: store, clock: ScheduleClock(store: store), options: options, observer: observer)
        } else {
            firer = nil
        }
        // With --no-prune too: the run directories of runs another node pruned are swept.
        var options = RetentionPruner.Options()
        options.stateDirectory = configuration.stateDirectory
        options.prune = configuration.prune
        if let interval = configuration.pruneInterval { options.interval = interval }
        options.log = messages.info
        options.warn = messages.warn
        pruner = RetentionPruner(store: store, options: options)
    }

    /// Runs until `shutdown()`: the queue worker on this thread, the rest on threads of their
    /// own. Throws when the state store fails the worker.
    public func run() throws {
        firer?.start()
        for watcher in watchers {
            watcher.start()
            messages.info("watching \(watcher.watched.folder) for \(watcher.watched.workflow.name)")
        }
        pruner.start()
        defer { pruner.shutdown() }
        // The firer stops once the worker has: a run it starts meanwhile just stays queued.
        defer { firer?.shutdown() }
        try worker.run()
    }

    /// Stops taking work: the watchers stop, the runs in flight are interrupted (they stay
    /// queued, in their place) and `run()` returns.
    public func shutdown() {
        for watcher in watchers { watcher.stop() }
        worker.shutdown()
    }

    /// One `FolderWatcher` per workflow, into the first queue this process serves.
    private static func watchers(_ configuration: Configuration, store: any StateStore, observer: any RunObserver,
                                 messages: Messages) throws -> [FolderWatcher]
    {
        var watchers: [FolderWatcher] = []
        var seen: [String: String] = [:]
        for workflow in configuration.watches {
            let watched: WatchedFolder
            do { watched = try WatchedFolder(workflow: workflow) } catch {
                throw ConfigurationError(description: error.description
                    + (workflow.triggers.watch == nil ? " (serve --watch takes workflows with an 'on: watch:' block)" : ""))
            }
            if let other = seen[watched.identity] {
                throw ConfigurationError(description: "\(workflow.file) and \(other) both watch \(watched.folder) as workflow "
                                         + "'\(workflow.name)': give each workflow its own name")
            }
            seen[watched.identity] = workflow.file
            var options = FolderWatcher.Options()
            options.queue = configuration.worker.queues.first ?? "default"
            options.pollOnly = configuration.watchPollOnly
            options.warn = messages.warn
            watchers.append(try FolderWatcher(watched: watched, store: store, options: options, observer: observer))
        }
        return watchers
    }

    /// Starts the HTTP API and says its URL with the default token (as Jupyter does).
    private static func startHTTP(_ http: HTTP, stateDirectory: String, store: any StateStore, registry: PluginRegistry,
                                  metrics: ServeMetrics, messages: Messages) throws
    {
        do {
            let address = try ListenAddress(parsing: http.address)
            if !address.isLoopback && http.tlsCertificate == nil && !http.plaintext {
                throw ConfigurationError(description: "--http \(http.address) is reachable from other machines: give --tls-cert "
                    + "and --tls-key, or --http-plaintext if a TLS proxy stands in front")
            }
            let defaultToken = try APITokens.loadOrCreateDefault(stateDirectory: stateDirectory)
            var tokens = [APITokens.token(name: "default", access: .write, secret: defaultToken)]
            if let file = http.tokenFile { tokens += try APITokens.parseFile(file) }
            var configuration = HTTPAPIServer.Configuration(address: address, tokens: APITokens(tokens: tokens),
                                                            tlsCertificate: http.tlsCertificate, tlsKey: http.tlsKey)
            configuration.maxActiveRequests = http.maxActiveRequests
            configuration.maxWaitingRequests = http.maxWaitingRequests
            configuration.maxEventStreams = http.maxEventStreams
            configuration.connections = http.connections
            configuration.workflowDirectory = http.workflowDirectory.map { URL(fileURLWithPath: $0).standardizedFileURL.path }
            let running = try HTTPAPIServer.start(configuration, store: store, registry: registry, stateDirectory: stateDirectory,
                                                  metrics: metrics)
            // The dashboard's URL with the token, to open as it is (the page moves the token
            // out of the address bar at once).
            messages.info("Dashboard: \(running.baseURL)/?token=\(defaultToken)")
            if running.maxConnections < http.connections.maxConnections {
                messages.warn("the HTTP API takes at most \(running.maxConnections) connections, not "
                    + "\(http.connections.maxConnections): half the descriptor limit (ulimit -n), the rest is for the runs")
            }
            messages.info("HTTP API on \(running.baseURL)/api/ (Authorization: Bearer <the token in \(stateDirectory)/http-token>)")
        } catch let error as HTTPAPIServer.StartError {
            throw ConfigurationError(description: error.description)
        } catch let error as APITokens.LoadError {
            throw ConfigurationError(description: error.description)
        }
    }
}
