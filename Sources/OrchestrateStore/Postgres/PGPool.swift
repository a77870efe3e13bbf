import Foundation

/// Connections shared by the threads of one process: each statement or transaction borrows
/// one, and gives it back unless it broke. A connection lost under a statement is dropped and
/// the error rethrown as `StoreError.unavailable` (the caller decides whether to try again:
/// a commit whose fate is unknown must not be repeated blindly); the next borrower connects
/// afresh, which is how a restarted server is picked up again.
final class PGPool: @unchecked Sendable {
    private let connection: String
    /// The location as people may see it (no password).
    let displayName: String
    private let maxConnections: Int
    private let condition = NSCondition()
    private var idle: [PGConnection] = []
    private var open = 0

    init(connection: String, displayName: String, maxConnections: Int = 16) {
        self.connection = connection
        self.displayName = displayName
        self.maxConnections = maxConnections
    }

    /// Opens one connection now, so a wrong URL or an unreachable server is reported at start.
    func check() throws {
        let conn = try connect()
        condition.withLock {
            open += 1
            idle.append(conn)
        }
    }

    /// Runs `body` on a borrowed connection, outside any transaction.
    @discardableResult
    func withConnection<T>(_ body: (PGConnection) throws -> T) throws -> T {
        let conn = try borrow()
        var healthy = true
        defer { giveBack(conn, healthy: healthy) }
        do {
            return try body(conn)
        } catch let failure as PGConnection.Failure {
            healthy = conn.isHealthy && !failure.connectionLost
            throw healthy ? failure : StoreError.unavailable(location: displayName, reason: failure.message)
        }
    }

    /// Runs `body` in a transaction (READ COMMITTED), committing when it returns and rolling
    /// back when it throws. A deadlock (`40P01`) or serialization failure (`40001`) is retried
    /// a few times: both mean nothing was written.
    @discardableResult
    func transaction<T>(_ body: (PGConnection) throws -> T) throws -> T {
        var tries = 0
        while true {
            do {
                return try withConnection { conn in
                    try conn.execute("BEGIN")
                    do {
                        let result = try body(conn)
                        try conn.execute("COMMIT")
                        return result
                    } catch {
                        if conn.isHealthy { _ = try? conn.execute("ROLLBACK") }
                        throw error
                    }
                }
            } catch let failure as PGConnection.Failure where ["40P01", "40001"].contains(failure.sqlState ?? "") && tries < 5 {
                tries += 1
                Thread.sleep(forTimeInterval: Double.random(in: 0.001...0.01) * Double(tries))
            }
        }
    }

    private func borrow() throws -> PGConnection {
        condition.lock()
        while idle.isEmpty && open >= maxConnections { condition.wait() }
        if let conn = idle.popLast() {
            condition.unlock()
            return conn
        }
        open += 1
        condition.unlock()
        do {
            return try connect()
        } catch {
            condition.withLock {
                open -= 1
                condition.signal()
            }
            throw error
        }
    }

    private func giveBack(_ conn: PGConnection, healthy: Bool) {
        condition.withLock {
            // A connection left inside a transaction block would start the next user's work in it.
            if healthy && conn.isHealthy && conn.isOutsideTransaction { idle.append(conn) } else { open -= 1 }
            condition.signal()
        }
    }

    /// A new connection, or `StoreError.unavailable` naming the location without its password.
    func connect() throws -> PGConnection {
        do {
            return try PGConnection(connection)
        } catch let failure as PGConnection.Failure {
            throw StoreError.unavailable(location: displayName, reason: failure.message)
        }
    }
}
