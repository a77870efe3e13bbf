#if canImport(Glibc)
import Glibc
#endif
import OrchestrateJSON
import OrchestratePluginKit

/// A live connection target opened by `sftp.connect`: its parameters plus a pool of idle
/// connections. Transfer steps borrow connections from it (a big file borrows several, one per
/// range), so one session serves steps running in parallel without sharing a libssh2 session
/// between threads.
final class Session: @unchecked Sendable {
    let id: String
    let parameters: ConnectionParameters
    private let lock = Lock()
    private var idle: [Connection] = []
    private var closed = false

    init(id: String, parameters: ConnectionParameters) {
        self.id = id
        self.parameters = parameters
    }

    /// An idle connection bound to `step`, or a new one.
    func borrow(_ step: StepContext) throws(StepError) -> Connection {
        if let connection = lock.withLock({ idle.popLast() }) {
            connection.step = step
            return connection
        }
        return try Connection(parameters, step: step)
    }

    /// Returns a healthy connection to the pool; a broken one is dropped.
    func giveBack(_ connection: Connection) {
        connection.step = nil
        if connection.broken { connection.shutdown(); return }
        let keep = lock.withLock { () -> Bool in
            guard !closed, idle.count < 16 else { return false }
            idle.append(connection)
            return true
        }
        if !keep { connection.shutdown() }
    }

    /// Seeds the pool with the connection the connect step opened.
    func adopt(_ connection: Connection) { giveBack(connection) }

    func close() {
        let connections = lock.withLock { () -> [Connection] in
            closed = true
            defer { idle.removeAll() }
            return idle
        }
        for connection in connections { connection.shutdown() }
    }

    /// Borrows a connection for the duration of `body`.
    func with<T>(_ step: StepContext, _ body: (Connection) throws(StepError) -> T) throws(StepError) -> T {
        let connection = try borrow(step)
        defer { giveBack(connection) }
        return try body(connection)
    }
}

/// The process-wide registry of sessions, keyed by the opaque id `sftp.connect` outputs.
enum Sessions {
    private static let lock = Lock()
    nonisolated(unsafe) private static var open: [String: Session] = [:]
    nonisolated(unsafe) private static var counter = 0

    static func register(_ parameters: ConnectionParameters) -> Session {
        lock.withLock {
            counter += 1
            let session = Session(id: "sftp-\(getpid())-\(counter)", parameters: parameters)
            open[session.id] = session
            return session
        }
    }

    static func close(_ id: String) {
        let session = lock.withLock { open.removeValue(forKey: id) }
        session?.close()
    }

    /// The session a transfer step uses: its `session` input when that session is open in this
    /// process; otherwise a private one from its own connection fields (standalone use, or after
    /// a resume in a new process); `owned` says the caller must close it.
    static func resolve(_ step: StepContext) throws(StepError) -> (session: Session, owned: Bool) {
        if let id = try step.optionalString("session"), let session = lock.withLock({ open[id] }) {
            return (session, false)
        }
        if ConnectionParameters.present(step) {
            return (Session(id: "private", parameters: try ConnectionParameters(step)), true)
        }
        if let id = try step.optionalString("session") {
            throw .retryable("sftp session \(id) is not open in this process (give the connection fields too, so the step can reconnect)",
                             code: "session_unknown")
        }
        throw .invalidInput("give either session (from sftp.connect) or host, user and an authentication method")
    }
}
