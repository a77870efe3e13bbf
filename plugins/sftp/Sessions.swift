#if canImport(Glibc)
import Glibc
#endif
import OrchestrateJSON
import OrchestratePluginKit

/// A live connection target opened by `sftp.connect`: its parameters, one shared connection
/// that every step of the session multiplexes its requests over (files in parallel, pipelined
/// reads and writes), and a pool of extra connections that the ranges of one big file borrow
/// so that their encryption runs on several cores.
final class Session: @unchecked Sendable {
    let id: String
    let parameters: ConnectionParameters
    private let lock = Lock()
    /// Held while the shared connection is being (re)opened, so parallel callers wait for one
    /// login instead of each making their own.
    private let connecting = Lock()
    private var primary: Connection?
    private var idle: [Connection] = []
    private var closed = false

    init(id: String, parameters: ConnectionParameters) {
        self.id = id
        self.parameters = parameters
    }

    /// The shared connection, reopened if it broke.
    func shared(_ step: StepContext) throws(StepError) -> Connection {
        if let connection = lock.withLock({ primary }), !connection.broken { return connection }
        let opened = connecting.withLock { () -> Result<Connection, StepError> in
            if let connection = lock.withLock({ primary }), !connection.broken { return .success(connection) }
            return Result { () throws(StepError) -> Connection in
                let connection = try Connection(parameters, step: step)
                let previous = lock.withLock { () -> Connection? in
                    defer { primary = connection }
                    return primary
                }
                previous?.shutdown()
                return connection
            }
        }
        return try opened.get()
    }

    /// An extra connection for one range of a big file, used by one thread only; give it back.
    func borrow(_ step: StepContext) throws(StepError) -> Connection {
        if let connection = lock.withLock({ idle.popLast() }), !connection.broken { return connection }
        return try Connection(parameters, step: step)
    }

    /// Returns a healthy borrowed connection to the pool; a broken one is closed.
    func giveBack(_ connection: Connection) {
        if connection.broken { connection.shutdown(); return }
        let keep = lock.withLock { () -> Bool in
            guard !closed, idle.count < 16 else { return false }
            idle.append(connection)
            return true
        }
        if !keep { connection.shutdown() }
    }

    /// Makes the connection the connect step opened the shared one.
    func adopt(_ connection: Connection) { lock.withLock { primary = connection } }

    func close() {
        let connections = lock.withLock { () -> [Connection] in
            closed = true
            defer { idle.removeAll(); primary = nil }
            return idle + (primary.map { [$0] } ?? [])
        }
        // A polite close waits for the server's goodbye (with OpenSSH, until ssh exits: ~10 ms
        // each here): side by side, the ranges' connections add one wait to a download's end, not four.
        let others = connections.dropFirst().map { connection in Worker { connection.shutdown() } }
        connections.first?.shutdown()
        for worker in others { worker.join() }
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
    static func resolve(_ server: ServerInputs) throws(StepError) -> (session: Session, owned: Bool) {
        if let id = server.session, let session = lock.withLock({ open[id] }) {
            return (session, false)
        }
        if server.connection.host != nil {
            return (Session(id: "private", parameters: try ConnectionParameters(server.connection)), true)
        }
        if let id = server.session {
            throw .retryable("sftp session \(id) is not open in this process (give the connection fields too, so the step can reconnect)",
                             code: "session_unknown")
        }
        throw .invalidInput("give either session (from sftp.connect) or host, user and an authentication method")
    }
}
