#if canImport(Glibc)
import Glibc
#endif
import OrchestrateJSON
import OrchestratePluginKit

/// `sftp.accept-paths`: the persistent session. Announces that it accepts paths, then uploads
/// every item added while it runs (`orchestrate add-path`), `parallel` at a time, until the
/// session is closed (`orchestrate close`, or idle with `close_when_idle`) or cancelled.
struct AcceptPathsStep: StepDefinition {
    static let id = "sftp.accept-paths"
    static let version = "1.0.0"
    static let summary = "Persistent SFTP session: upload each path added while it runs, several at once."
    static let documentation = """
        Items are `{"source": "/abs/local/file", "destination": "path/under/remote_root"}`. Each \
        is uploaded like sftp.upload (partial + rename, resumed from the partial after a crash) \
        and reported on its own (progress, finished or failed with the error); one bad item never \
        stops the others. Items added while the step was down are transferred when it runs again. \
        An item that fails for a passing reason (the server went away) is tried again per the \
        step's retry: policy, and held while the server does not answer (at most hold_timeout); \
        only a permanent failure (no such local file, a refused path) finishes it failed.
        """
    struct Inputs: StepInputs {
        @Input(help: "files transferred at once", minimum: 1, maximum: 64) var parallel = 4
        @Input(help: "end the step once the queue is empty") var closeWhenIdle = false
        @Input(help: "tries per item on connection errors", minimum: 1) var itemAttempts = 3
        /// One connection per file: many files move at once already.
        var transfer = TransferInputs(connections: 1)
        var server = ServerInputs()
    }
    static let inputSchema = Inputs.schemaText
    struct Outputs: StepOutputs {
        @Output(help: "items whose file arrived", minimum: 0) var filesDone: Int64
        @Output(help: "items that failed", minimum: 0) var filesFailed: Int64
        @Output(help: "bytes of the files that arrived", minimum: 0) var bytes: Int64
    }
    static let outputSchema = Outputs.schemaText
    static let acceptsItems = true

    static func run(_ step: StepContext) throws {
        let inputs = try step.read(Inputs.self)
        let options = try TransferOptions(inputs.transfer, sha256: nil, step: step)
        let (parallel, closeWhenIdle, attempts) = (inputs.parallel, inputs.closeWhenIdle, inputs.itemAttempts)
        let (session, owned) = try Sessions.resolve(inputs.server)
        defer { if owned { session.close() } }
        let fs = RemoteFS(connection: try session.shared(step), step: step)
        // Remote folders made or seen by any item are checked once per session, not per file.
        let root = try RootGuard(try RemoteRoot(inputs.server.remoteRoot, home: try fs.realpath(".")), fs: fs,
                                 create: inputs.server.createRoot)
        step.log(.info, "accepting paths: up to \(parallel) at once over one connection into \(root.root.path)")
        let state = AcceptState()
        var workers: [Worker] = []
        for _ in 0 ..< parallel {
            workers.append(Worker {
                Self.work(step, session: session, root: root, options: options,
                          attempts: attempts, closeWhenIdle: closeWhenIdle, state: state)
            })
        }
        for worker in workers { worker.join() }
        let (done, failed, bytes) = state.totals
        var outputs = Outputs()
        outputs.filesDone = done
        outputs.filesFailed = failed
        outputs.bytes = bytes
        try step.setOutputs(outputs)
        if step.isCancelled { throw StepError.cancelled("sftp.accept-paths cancelled (\(done) files done)") }
    }

    /// One worker: takes items until the session closes, the step is cancelled, or (with
    /// close_when_idle) nobody has anything left to do.
    private static func work(_ step: StepContext, session: Session, root: RootGuard,
                             options: TransferOptions, attempts: Int, closeWhenIdle: Bool, state: AcceptState)
    {
        while !step.isCancelled && !state.stopped {
            switch step.nextItem(timeout: .milliseconds(300)) {
            case .closed:
                state.stop()
                return
            case .timeout:
                if closeWhenIdle && state.idle() { state.stop() }
            case .item(let item):
                state.begin()
                defer { state.end() }
                let result = transfer(item, step, session: session, root: root,
                                      options: options, attempts: attempts)
                switch result {
                case .success(let size):
                    state.finished(bytes: size)
                    step.itemDone(item.id)
                case .failure(let error) where error.kind == .cancelled:
                    return // not reported: handed out again on the next attempt
                case .failure(let error):
                    // The engine tries a retryable failure again (the step's retry:, held while
                    // the server does not answer); a permanent one is left for a person.
                    if error.kind != .retryable && error.kind != .timeout { state.failed() }
                    step.log(.warn, "item \(item.id) failed: \(error.message)")
                    step.itemFailed(item.id, error)
                }
            }
        }
    }

    /// Uploads one item over the session's shared connection; connection errors are retried
    /// (the session reopens a broken connection once for all workers).
    private static func transfer(_ item: StepItem, _ step: StepContext, session: Session, root: RootGuard,
                                 options: TransferOptions, attempts: Int) -> Result<Int64, StepError>
    {
        guard let source = item.value?["source"]?.stringValue, let destination = item.value?["destination"]?.stringValue,
              source.hasPrefix("/")
        else {
            return .failure(.invalidInput("item must be {\"source\": \"/absolute/path\", \"destination\": \"remote/path\"}"))
        }
        let remote: String
        do { remote = try root.root.relative(destination) } catch { return .failure(error) }
        var lastError = StepError.retryable("not attempted")
        for attempt in 1 ... attempts {
            do throws(StepError) {
                let conn = try session.shared(step)
                let transfer = FileTransfer(session: session, step: step, options: options)
                var lastShown: Int64 = 0, lastSaved: Int64 = 0, size: Int64 = -1
                // The size first (a file of a MiB or more): `status` shows the item running,
                // with its size, from the start.
                transfer.onSize = { bytes in
                    size = bytes
                    if bytes >= 1 << 20 { step.itemProgress(item.id, bytesDone: 0, bytesTotal: bytes) }
                }
                transfer.onProgress = { bytes in
                    // Progress of its own only every MiB: a small file's one report is the final
                    // one below (the host may journal each report).
                    if bytes - lastShown >= 1 << 20 {
                        lastShown = bytes
                        step.itemProgress(item.id, bytesDone: bytes, bytesTotal: size >= 0 ? max(size, bytes) : -1)
                    }
                    if bytes - lastSaved >= 8 << 20 {
                        lastSaved = bytes
                        step.saveItemCheckpoint(item.id, Array("{\"offset\":\(bytes)}".utf8))
                    }
                }
                let result = try transfer.upload(local: source, remote: remote, root: root, connection: conn, checkpoint: nil)
                step.itemProgress(item.id, bytesDone: result.size, bytesTotal: result.size)
                return .success(result.size)
            } catch {
                lastError = error
                guard error.kind == .retryable || error.kind == .timeout, attempt < attempts, !step.isCancelled else { break }
                step.log(.info, "item \(item.id): \(error.message); trying again")
                if step.sleep(milliseconds: 300 * Int64(attempt)) { return .failure(.cancelled()) }
            }
        }
        if step.isCancelled { return .failure(.cancelled()) }
        return .failure(lastError)
    }
}

/// Counters shared by the workers of one accept-paths step.
private final class AcceptState: @unchecked Sendable {
    private let lock = Lock()
    private var busy = 0, done: Int64 = 0, failures: Int64 = 0, bytes: Int64 = 0
    private var _stopped = false

    var stopped: Bool { lock.withLock { _stopped } }
    var totals: (Int64, Int64, Int64) { lock.withLock { (done, failures, bytes) } }

    func stop() { lock.withLock { _stopped = true } }
    func begin() { lock.withLock { busy += 1 } }
    func end() { lock.withLock { busy -= 1 } }
    func idle() -> Bool { lock.withLock { busy == 0 } }
    func finished(bytes size: Int64) { lock.withLock { done += 1; bytes += size } }
    func failed() { lock.withLock { failures += 1 } }
}
