import CLibPQ
import Foundation

/// One libpq connection, used by one thread at a time (the pool hands it out). Statements take
/// their parameters as text (prepared statements), so nothing is ever spliced into SQL.
final class PGConnection: @unchecked Sendable {  // used by one thread at a time, handed over whole
    /// A failed statement or connection. `sqlState` is PostgreSQL's error code (`40P01`…).
    struct Failure: Error, CustomStringConvertible {
        let message: String
        let sqlState: String?
        /// The connection is gone (server restarted, network cut): it must not be reused.
        let connectionLost: Bool
        var description: String { message }
    }

    private let handle: OpaquePointer
    /// Set when a pipeline broke off half-way: the connection's protocol state is unknown, so
    /// the pool must not hand it out again.
    private var abandoned = false

    /// Defaults that keep a dead network from hanging a statement for the kernel's TCP timeout
    /// (many minutes): a node cut off must notice within its lease. Settings in the user's
    /// connection string win over these.
    static let defaults: [(String, String)] = [
        ("connect_timeout", "5"), ("tcp_user_timeout", "5000"), ("keepalives", "1"), ("keepalives_idle", "5"),
        ("keepalives_interval", "2"), ("keepalives_count", "3"), ("application_name", "orchestrate"),
    ]

    /// Connects with libpq's own rules (URL or key=value string, `PG*` variables, password
    /// file). The error never holds the password: libpq does not echo it.
    init(_ connection: String) throws {
        // `dbname` last and expanded: the user's URL or key=value string overrides the defaults.
        let keywords = PGConnection.defaults.map(\.0) + ["dbname"]
        let values = PGConnection.defaults.map(\.1) + [connection]
        let made: OpaquePointer? = keywords.withCStringArray { k in values.withCStringArray { v in PQconnectdbParams(k, v, 1) } }
        guard let conn = made else {
            throw Failure(message: "out of memory", sqlState: nil, connectionLost: true)
        }
        guard PQstatus(conn) == CONNECTION_OK else {
            let message = PGConnection.text(PQerrorMessage(conn))
            PQfinish(conn)
            throw Failure(message: message, sqlState: nil, connectionLost: true)
        }
        handle = conn
        // Notices (e.g. "relation already exists, skipping") are not for the user's terminal.
        PQsetNoticeProcessor(conn, { _, _ in }, nil)
    }

    deinit { PQfinish(handle) }

    var isHealthy: Bool { !abandoned && PQstatus(handle) == CONNECTION_OK }

    /// The socket, for waiting on notifications.
    var socket: Int32 { PQsocket(handle) }

    /// Runs one statement with `$1…` parameters (nil is SQL NULL) and returns its rows.
    ///
    /// Each distinct statement is prepared once per connection and executed by name after
    /// that: the server parses and plans it once, not at every commit (that was most of the
    /// database's CPU per run). If another node's migration changed a table under a prepared
    /// statement (`0A000`, "cached plan must not change result type"), the statements are
    /// dropped and this one is prepared again.
    @discardableResult
    func execute(_ sql: String, _ parameters: [String?] = []) throws -> PGRows {
        do {
            return try executePrepared(sql, parameters)
        } catch let failure as Failure where failure.sqlState == "0A000" && !failure.connectionLost {
            forgetPreparedStatements()
            return try executePrepared(sql, parameters)
        }
    }

    /// Runs `statements` in one round trip (libpq's pipeline mode) as one implicit transaction:
    /// the server commits them together when it reaches the pipeline's end, or, when one fails,
    /// rolls back those before it and skips those after. Call it outside a transaction block.
    /// Throws the first failure; returns each statement's rows otherwise.
    ///
    /// One round trip instead of one per statement (plus BEGIN and COMMIT): each round trip is
    /// a send, a wake-up of the server's backend and of this thread, on both sides' CPU.
    @discardableResult
    func executePipeline(_ statements: [PGStatement]) throws -> [PGRows] {
        do {
            return try executePipelineOnce(statements)
        } catch let failure as Failure where failure.sqlState == "0A000" && !failure.connectionLost {
            forgetPreparedStatements()  // nothing was written: the failure rolled it all back (and ended a block it opened)
            return try executePipelineOnce(statements)
        }
    }

    private func executePipelineOnce(_ statements: [PGStatement]) throws -> [PGRows] {
        // Preparing needs its own round trip: done before the pipeline, once per connection.
        let names = try statements.map { try statementName($0.sql, parameterCount: $0.parameters.count) }
        guard PQenterPipelineMode(handle) == 1 else { throw failure(nil) }
        // Until every result is read, the connection is mid-protocol: give it up if we stop early.
        abandoned = true
        for (name, statement) in zip(names, statements) {
            let sent = withCStrings(statement.parameters) { values in
                PQsendQueryPrepared(handle, name, Int32(statement.parameters.count), values, nil, nil, 0)
            }
            guard sent == 1 else { throw failure(nil) }
        }
        guard PQpipelineSync(handle) == 1 else { throw failure(nil) }
        var results: [PGRows] = []
        var firstFailure: Failure?
        for _ in statements {
            guard let result = PQgetResult(handle) else { throw failure(nil) }
            switch PQresultStatus(result) {
            case PGRES_COMMAND_OK, PGRES_TUPLES_OK:
                results.append(PGRows(result))
            case PGRES_PIPELINE_ABORTED:  // skipped after an earlier failure
                PQclear(result)
            default:
                if firstFailure == nil { firstFailure = failure(result) }
                PQclear(result)
            }
            // Each statement's results end with a NULL.
            if let extra = PQgetResult(handle) {
                PQclear(extra)
                throw Failure(message: "unexpected second result in a pipeline", sqlState: nil, connectionLost: true)
            }
        }
        guard let sync = PQgetResult(handle) else { throw failure(nil) }
        let synced = PQresultStatus(sync) == PGRES_PIPELINE_SYNC
        PQclear(sync)
        guard synced, PQexitPipelineMode(handle) == 1 else { throw failure(nil) }
        abandoned = false
        if let firstFailure {
            endAbortedTransactionBlock()
            throw firstFailure
        }
        return results
    }

    /// Whether no transaction block is open: a connection handed back to the pool must be.
    var isOutsideTransaction: Bool { PQtransactionStatus(handle) == PQTRANS_IDLE }

    /// A pipeline that opens its own block (`BEGIN … COMMIT`, as a run's detail does) and fails
    /// inside it leaves the session in that aborted block: every later statement on this
    /// connection would fail (25P02) until a ROLLBACK. The implicit transaction of a pipeline
    /// without BEGIN has already been rolled back by the server.
    private func endAbortedTransactionBlock() {
        guard !isOutsideTransaction else { return }
        let result = PQexec(handle, "ROLLBACK")
        if PQresultStatus(result) != PGRES_COMMAND_OK || !isOutsideTransaction { abandoned = true }
        PQclear(result)
    }

    /// Statement names by SQL text; at most `maxPrepared` (statements with many `VALUES` rows
    /// come in many sizes), then they are all dropped and prepared again as they come.
    private var prepared: [String: String] = [:]
    private var preparedCount = 0
    private static let maxPrepared = 200

    private func executePrepared(_ sql: String, _ parameters: [String?]) throws -> PGRows {
        let name = try statementName(sql, parameterCount: parameters.count)
        let result: OpaquePointer? = withCStrings(parameters) { values in
            PQexecPrepared(handle, name, Int32(parameters.count), values, nil, nil, 0)
        }
        return try rows(of: result)
    }

    private func statementName(_ sql: String, parameterCount: Int) throws -> String {
        if let name = prepared[sql] { return name }
        if prepared.count >= Self.maxPrepared { forgetPreparedStatements() }
        preparedCount += 1
        let name = "orc\(preparedCount)"
        _ = try rows(of: PQprepare(handle, name, sql, Int32(parameterCount), nil))
        prepared[sql] = name
        return name
    }

    private func forgetPreparedStatements() {
        prepared.removeAll()
        if let result = PQexec(handle, "DEALLOCATE ALL") { PQclear(result) }
    }

    private func rows(of result: OpaquePointer?) throws -> PGRows {
        guard let result else { throw failure(nil) }
        switch PQresultStatus(result) {
        case PGRES_COMMAND_OK, PGRES_TUPLES_OK:
            return PGRows(result)
        default:
            let error = failure(result)
            PQclear(result)
            throw error
        }
    }

    /// Runs several statements separated by `;` (no parameters): migrations.
    func executeScript(_ sql: String) throws {
        guard let result = PQexec(handle, sql) else { throw failure(nil) }
        defer { PQclear(result) }
        let status = PQresultStatus(result)
        guard status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK else { throw failure(result) }
    }

    /// Reads what the server sent and returns the channels of the notifications received.
    func takeNotifications() throws -> [String] {
        guard PQconsumeInput(handle) == 1 else { throw failure(nil) }
        var channels: [String] = []
        while let notify = PQnotifies(handle) {
            channels.append(String(cString: notify.pointee.relname))
            PQfreemem(notify)
        }
        return channels
    }

    private func failure(_ result: OpaquePointer?) -> Failure {
        let message = result.map { PGConnection.text(PQresultErrorMessage($0)) } ?? PGConnection.text(PQerrorMessage(handle))
        let state = result.flatMap { PQresultErrorField($0, Int32(UInt8(ascii: "C"))) }.map { String(cString: $0) }
        return Failure(message: message.isEmpty ? "connection lost" : message, sqlState: state,
                       connectionLost: PQstatus(handle) != CONNECTION_OK)
    }

    static func text(_ pointer: UnsafePointer<CChar>?) -> String {
        guard let pointer else { return "" }
        return String(cString: pointer).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// Calls `body` with a C array of the parameters' C strings (NULL for nil), all copied
    /// into one buffer (a copy each was a tenth of a busy worker's CPU).
    private func withCStrings<T>(_ strings: [String?], _ body: (UnsafePointer<UnsafePointer<CChar>?>?) -> T) -> T {
        guard !strings.isEmpty else { return body(nil) }
        var buffer: [UInt8] = []
        buffer.reserveCapacity(strings.reduce(0) { $0 + ($1?.utf8.count ?? 0) + 1 })
        var offsets: [Int?] = []
        offsets.reserveCapacity(strings.count)
        for string in strings {
            guard let string else {
                offsets.append(nil)
                continue
            }
            offsets.append(buffer.count)
            buffer.append(contentsOf: string.utf8)
            buffer.append(0)
        }
        return buffer.withUnsafeBufferPointer { raw in
            raw.withMemoryRebound(to: CChar.self) { bytes in
                let pointers: [UnsafePointer<CChar>?] = offsets.map { $0.map { bytes.baseAddress! + $0 } }
                return pointers.withUnsafeBufferPointer { body($0.baseAddress) }
            }
        }
    }
}

extension Array where Element == String {
    /// A NULL-terminated C array of the strings, valid during `body`.
    func withCStringArray<T>(_ body: (UnsafePointer<UnsafePointer<CChar>?>) -> T) -> T {
        var pointers: [UnsafePointer<CChar>?] = map { UnsafePointer(strdup($0)) } + [nil]
        defer { for p in pointers { free(UnsafeMutablePointer(mutating: p)) } }
        return pointers.withUnsafeMutableBufferPointer { body(UnsafePointer($0.baseAddress!)) }
    }
}

/// A statement and its `$1…` parameters (nil is SQL NULL), for `executePipeline`.
struct PGStatement {
    let sql: String
    let parameters: [String?]

    init(_ sql: String, _ parameters: [String?] = []) {
        self.sql = sql
        self.parameters = parameters
    }
}

/// The rows of a result, read by column name, in text format.
final class PGRows {
    private let result: OpaquePointer
    let count: Int
    private let columns: [String: Int32]

    init(_ result: OpaquePointer) {
        self.result = result
        count = Int(PQntuples(result))
        var columns: [String: Int32] = [:]
        for i in 0..<PQnfields(result) { columns[String(cString: PQfname(result, i))] = i }
        self.columns = columns
    }

    deinit { PQclear(result) }

    /// Rows changed by an UPDATE/DELETE/INSERT.
    var affected: Int { Int(String(cString: PQcmdTuples(result))) ?? 0 }

    subscript(row: Int) -> PGRow { PGRow(rows: self, index: Int32(row)) }

    var all: [PGRow] { (0..<count).map { self[$0] } }

    fileprivate func value(_ row: Int32, _ column: String) -> String? {
        guard let c = columns[column] else { preconditionFailure("no column \(column) in the result") }
        if PQgetisnull(result, row, c) == 1 { return nil }
        return String(cString: PQgetvalue(result, row, c))
    }

    fileprivate func bytes(_ row: Int32, _ column: String) -> [UInt8]? {
        guard let c = columns[column] else { preconditionFailure("no column \(column) in the result") }
        if PQgetisnull(result, row, c) == 1 { return nil }
        var length = 0
        guard let raw = PQunescapeBytea(PQgetvalue(result, row, c), &length) else { return nil }
        defer { PQfreemem(raw) }
        return [UInt8](UnsafeBufferPointer(start: raw, count: length))
    }
}

/// One row; typed getters that say what they expect.
struct PGRow {
    let rows: PGRows
    let index: Int32

    func string(_ column: String) -> String? { rows.value(index, column) }
    func int(_ column: String) -> Int? { string(column).flatMap { Int($0) } }
    func int64(_ column: String) -> Int64? { string(column).flatMap { Int64($0) } }
    func double(_ column: String) -> Double? { string(column).flatMap { Double($0) } }
    func bool(_ column: String) -> Bool? { string(column).map { $0 == "t" } }
    func bytes(_ column: String) -> [UInt8]? { rows.bytes(index, column) }
}

/// Parameters as PostgreSQL's text format expects them.
enum PGText {
    static func of(_ value: Double?) -> String? { value.map { "\($0)" } }
    static func of(_ value: Int?) -> String? { value.map(String.init) }
    static func of(_ value: Int64?) -> String? { value.map(String.init) }
    static func of(_ value: Int32?) -> String? { value.map { String($0) } }
    static func of(_ value: Bool) -> String { value ? "true" : "false" }
    /// bytea in hex format: `\x0102…`.
    static func bytea(_ bytes: [UInt8]) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var text = [UInt8]("\\x".utf8)
        text.reserveCapacity(2 + bytes.count * 2)
        for b in bytes {
            text.append(digits[Int(b >> 4)])
            text.append(digits[Int(b & 15)])
        }
        return String(decoding: text, as: UTF8.self)
    }
    /// A text[] literal for `= ANY($1)`: `{"a","b"}` with quotes and backslashes escaped.
    static func array(_ values: [String]) -> String {
        array(values.map(Optional.some))
    }

    /// An array literal whose elements may be SQL NULL (nil), for `unnest($1::text[], …)`:
    /// every element quoted, so the same text serves `text[]`, `bigint[]` or `double precision[]`.
    static func array(_ values: [String?]) -> String {
        let quote = UInt8(ascii: "\""), backslash = UInt8(ascii: "\\")
        var text: [UInt8] = [UInt8(ascii: "{")]
        text.reserveCapacity(values.reduce(2) { $0 + ($1?.utf8.count ?? 4) + 3 })
        for (i, value) in values.enumerated() {
            if i > 0 { text.append(UInt8(ascii: ",")) }
            guard let value else {
                text += "NULL".utf8
                continue
            }
            text.append(quote)
            // Byte by byte: no byte of a multi-byte UTF-8 sequence is a quote or a backslash.
            for byte in value.utf8 {
                if byte == quote || byte == backslash { text.append(backslash) }
                text.append(byte)
            }
            text.append(quote)
        }
        text.append(UInt8(ascii: "}"))
        return String(decoding: text, as: UTF8.self)
    }
}
