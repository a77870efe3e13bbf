import ArgumentParser
import Foundation
import OrchestrateEngine
import OrchestrateHTTPAPI
import OrchestrateOperations
import OrchestratePluginHost
import OrchestrateServe
import OrchestrateStore
import OrchestrateTokenBucket

struct ServeCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "serve",
        abstract: "Execute the queue of a state store until stopped.",
        discussion: """
            Takes queued runs (higher priority first, then in submission order), resumes runs left \
            unfinished by a process that died, and applies control verbs (cancel, stop, pause, \
            unpause, run-now) within a second. Several `serve` processes may share one state store: \
            each run is executed by one of them. SIGTERM or Ctrl-C stops taking work, interrupts the \
            runs in flight (they stay queued, in their place, and resume from their checkpoints) and \
            exits 0.

            --max-rate caps the bandwidth of everything this process transfers, together; a run \
            submitted with its own --max-rate is held to both caps. A timetable changes the cap at \
            its boundaries, for the transfers in flight too; `orchestrate queue rate` replaces it \
            live on every serve of the store.

            Several machines share one queue through a PostgreSQL store: each serves the named \
            queues it is given, as its node. A node that dies, or is cut off from the database \
            longer than its lease (15 s), loses its runs to another node serving their queue.

            It also starts the runs of the schedules registered in the store (`orchestrate schedule \
            add`; see `orchestrate schedules`): each due time starts one run, whichever serve gets \
            there first; --no-schedules leaves that to the others.

            Every minute it prunes finished runs past their retention (30 days unless `orchestrate \
            queue retention` or the workflow's `retention:` says otherwise), a hundred at a time; \
            --no-prune leaves that to the others (see `orchestrate prune`). Either way it then \
            removes the run directories under its --state of runs that are gone from the store \
            (pruned or deleted by any node).

            --watch FILE turns the workflow's watch folder (its `on: watch:` block) into work: each \
            file that has stopped changing for `settle` becomes a run, or an item of the workflow's \
            persistent session, exactly once (see docs/watch-folders.md).

            Examples:
              orchestrate serve --max-parallel 8
              orchestrate serve --watch workflows/outbox.yaml
              orchestrate serve --store postgresql://orc@db.internal/orchestrate --queue uploads --node edit-bay-3
              orchestrate serve --queue uploads --queue exports --max-rate 50M
              orchestrate serve --max-rate "Mon-Fri 08:00,10M 19:00,off"
            """)

    @Option(name: .customLong("max-parallel"), help: ArgumentHelp("Runs executing at once (default 4).", valueName: "n"))
    var maxParallel: Int = 4

    @Option(name: .customLong("max-rate"), help: MaxRateOption.help("all the runs this serve executes, together; `queue rate` changes it live"),
            transform: MaxRateOption.parse)
    var maxRate: RateTimetable?

    @Option(name: .customLong("queue"), help: ArgumentHelp(
        "A named queue to take runs from (repeatable; default: default).", valueName: "name"))
    var queues: [String] = []

    @Option(name: .customLong("http"), help: ArgumentHelp(
        "Also serve the HTTP API on HOST:PORT (e.g. 127.0.0.1:8080; see docs/http-api.md).", valueName: "addr"))
    var http: String?

    @Option(name: .customLong("http-token-file"), help: ArgumentHelp(
        "More API tokens, one per line: NAME read|write TOKEN.", valueName: "file"))
    var httpTokenFile: String?

    @Option(name: .customLong("tls-cert"), help: ArgumentHelp("The HTTP API's TLS certificate chain (PEM).", valueName: "file"))
    var tlsCert: String?

    @Option(name: .customLong("tls-key"), help: ArgumentHelp("The HTTP API's TLS private key (PEM).", valueName: "file"))
    var tlsKey: String?

    @Flag(name: .customLong("http-plaintext"), help: "Allow plain HTTP on an address other machines can reach (behind a TLS proxy).")
    var httpPlaintext = false

    @Option(name: .customLong("http-max-requests"), help: ArgumentHelp(
        "API requests worked on at once (event streams aside); more wait their turn.", valueName: "n"))
    var httpMaxRequests = 4

    @Option(name: .customLong("http-max-waiting"), help: ArgumentHelp(
        "API requests that may wait for their turn; more are answered 503 with Retry-After.", valueName: "n"))
    var httpMaxWaiting = 64

    @Option(name: .customLong("http-max-connections"), help: ArgumentHelp(
        "API connections open at once (at most half the descriptor limit); past it the longest idle one is closed.", valueName: "n"))
    var httpMaxConnections = 512

    @Option(name: .customLong("http-max-streams"), help: ArgumentHelp("API event streams open at once.", valueName: "n"))
    var httpMaxStreams = 64

    @Option(name: .customLong("http-head-timeout"), help: ArgumentHelp(
        "Seconds a client has to send a request's head; then its connection is closed.", valueName: "s"))
    var httpHeadTimeout = 10.0

    @Option(name: .customLong("http-body-timeout"), help: ArgumentHelp(
        "Seconds a client has to send a request's body once its head is in.", valueName: "s"))
    var httpBodyTimeout = 60.0

    @Option(name: .customLong("http-idle-timeout"), help: ArgumentHelp(
        "Seconds a keep-alive API connection may wait between requests, or a client leave its answer unread.", valueName: "s"))
    var httpIdleTimeout = 60.0

    @Option(name: .customLong("api-workflows"), help: ArgumentHelp(
        "The API starts only the workflows of this directory, by name (no workflow_yaml or workflow_path).", valueName: "dir"))
    var apiWorkflows: String?

    @Flag(name: .customLong("no-prune"), help: "Do not prune finished runs past their retention (other serve processes do).")
    var noPrune = false

    @Flag(name: .customLong("no-schedules"), help: "Do not start the runs of registered schedules (other serve processes do).")
    var noSchedules = false

    @Option(name: .customLong("watch"), help: ArgumentHelp(
        "A workflow whose 'on: watch:' folder this serve watches (repeatable).", valueName: "file"))
    var watchFiles: [String] = []

    @Flag(name: .customLong("watch-poll"), help: "Find new files in watched folders by scanning only, not inotify (network file systems).")
    var watchPoll = false

    @OptionGroup var global: GlobalOptions

    func validate() throws {
        if http == nil && (httpTokenFile != nil || tlsCert != nil || tlsKey != nil || httpPlaintext || apiWorkflows != nil) {
            throw ValidationError("--http-token-file, --tls-cert, --tls-key, --http-plaintext and --api-workflows need --http ADDR")
        }
        if httpMaxConnections < 1 || httpMaxStreams < 1 {
            throw ValidationError("--http-max-connections and --http-max-streams must be at least 1")
        }
        for (name, seconds) in [("head", httpHeadTimeout), ("body", httpBodyTimeout), ("idle", httpIdleTimeout)] where !(seconds > 0 && seconds <= 86400) {
            throw ValidationError("--http-\(name)-timeout takes seconds, more than 0 and at most 86400")
        }
        if let apiWorkflows {
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: apiWorkflows, isDirectory: &isDirectory), isDirectory.boolValue else {
                throw ValidationError("--api-workflows \(apiWorkflows) is not a directory")
            }
        }
        if (tlsCert == nil) != (tlsKey == nil) { throw ValidationError("give both --tls-cert and --tls-key, or neither") }
        if httpMaxRequests < 1 { throw ValidationError("--http-max-requests must be at least 1") }
        if httpMaxWaiting < 0 { throw ValidationError("--http-max-waiting must be 0 or more") }
        if maxParallel < 1 { throw ValidationError("--max-parallel must be at least 1") }
        if let bad = queues.first(where: { !QueueName.isValid($0) }) { throw ValidationError("--queue \(bad): \(QueueName.rule)") }
        if watchPoll && watchFiles.isEmpty { throw ValidationError("--watch-poll needs --watch FILE") }
    }

    func run() throws {
        Terminal.outliveOutput()
        let registry = global.loadPlugins()
        let store = try global.openStore()
        var worker = QueueWorker.Options(maxRuns: maxParallel)
        worker.queues = queues.isEmpty ? ["default"] : queues
        worker.warn = { Terminal.logLine("warning: \($0)", to: .standardError) }
        worker.engine = try global.engineOptions()
        // Always a bucket, uncapped without --max-rate: `queue rate` can then cap the transfers
        // already running.
        worker.engine.bandwidth = TokenBucket(timetable: maxRate ?? .unlimited)
        var configuration = Serve.Configuration(stateDirectory: global.resolvedStateDirectory(), worker: worker)
        configuration.http = http.map(httpConfiguration)
        configuration.schedules = !noSchedules
        configuration.prune = !noPrune
        configuration.pruneInterval = ProcessInfo.processInfo.environment["ORCHESTRATE_PRUNE_INTERVAL"]
            .flatMap(Double.init).flatMap { $0 > 0 ? $0 : nil }
        configuration.watches = try watchFiles.map { try WorkflowLoading.load(path: $0, registry: registry) }
        configuration.watchPollOnly = watchPoll
        let messages = Serve.Messages(info: { Terminal.logLine($0, to: .standardError) },
                                      warn: { Terminal.logLine("warning: \($0)", to: .standardError) })
        let serve: Serve
        do {
            serve = try Serve(configuration, store: store, registry: registry, observer: ServePrinter(json: global.json),
                              messages: messages)
        } catch let error as Serve.ConfigurationError {
            throw CLIFailure.usage(error.description)
        }
        let signals = SignalRelay(announce: "shutting down: interrupting runs in flight (they stay queued)") {
            serve.shutdown()
        }
        _ = signals
        do {
            try serve.run()
        } catch {
            throw CLIFailure(status: ExitStatus.runFailed, message: "the state store failed: \(error)")
        }
    }

    /// The HTTP API's flags, as `Serve` takes them.
    private func httpConfiguration(_ address: String) -> Serve.HTTP {
        var http = Serve.HTTP(address: address)
        http.tokenFile = httpTokenFile
        http.tlsCertificate = tlsCert
        http.tlsKey = tlsKey
        http.plaintext = httpPlaintext
        http.maxActiveRequests = httpMaxRequests
        http.maxWaitingRequests = httpMaxWaiting
        http.maxEventStreams = httpMaxStreams
        http.connections.maxConnections = httpMaxConnections
        http.connections.headTimeout = httpHeadTimeout
        http.connections.bodyTimeout = httpBodyTimeout
        http.connections.idleTimeout = httpIdleTimeout
        http.workflowDirectory = apiWorkflows
        return http
    }
}
