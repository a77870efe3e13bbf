import GRDB

/// The writer connection's statements for transactions and the journal, prepared once and
/// kept here.
///
/// GRDB's statement cache (`cachedStatement(sql:)`) finds a statement by hashing its SQL text:
/// the five look-ups of a chain step's commit (BEGIN, the fence, the steps, the events,
/// COMMIT) would cost more than binding the values.
///
/// Used only inside the pool's writer access, which serializes it; made again if the writer
/// connection ever changes (`isPrepared(on:)`).
final class SQLiteJournalStatements {
    private let connection: ObjectIdentifier
    let begin: Statement
    let commit: Statement
    /// Around each batch of a group commit (`SQLiteStateStore.writeGroup`).
    let savepoint: Statement
    let releaseSavepoint: Statement
    let rollbackToSavepoint: Statement
    /// The run's owner, for the fence check.
    let runOwner: Statement
    let updateRun: Statement
    let upsertSteps: SQLiteRowsStatement
    let insertEvents: SQLiteRowsStatement
    let deleteLease: Statement

    init(_ db: Database) throws {
        connection = ObjectIdentifier(db)
        begin = try db.makeStatement(sql: "BEGIN IMMEDIATE TRANSACTION")
        commit = try db.makeStatement(sql: "COMMIT TRANSACTION")
        savepoint = try db.makeStatement(sql: "SAVEPOINT journal_batch")
        releaseSavepoint = try db.makeStatement(sql: "RELEASE SAVEPOINT journal_batch")
        rollbackToSavepoint = try db.makeStatement(sql: "ROLLBACK TO SAVEPOINT journal_batch")
        runOwner = try db.makeStatement(sql: "SELECT owner_host, owner_pid, owner_start FROM runs WHERE id = ?")
        updateRun = try db.makeStatement(sql: """
            UPDATE runs SET status = ?, ending = ?, started_at = ?, finished_at = ?, error = ?, outputs_json = ?,
                            priority = ?, labels_json = ?, max_rate = ?, max_rate_timetable = ?
            WHERE id = ?
            """)
        // An upsert rather than INSERT OR REPLACE: a step is written at each of its transitions,
        // and REPLACE deletes the row and its key entry to insert them again.
        upsertSteps = SQLiteRowsStatement(db, head: """
            INSERT INTO steps (run_id, id, step, kind, item_index, item_json, status, attempt, failures,
                next_attempt_at, idempotency_key, outputs_json, error_kind, error_code, error_message,
                started_at, finished_at, completion_seq, node)
            VALUES
            """, row: "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", tail: """
            ON CONFLICT (run_id, id) DO UPDATE SET step = excluded.step, kind = excluded.kind,
                item_index = excluded.item_index, item_json = excluded.item_json, status = excluded.status,
                attempt = excluded.attempt, failures = excluded.failures,
                next_attempt_at = excluded.next_attempt_at, idempotency_key = excluded.idempotency_key,
                outputs_json = excluded.outputs_json, error_kind = excluded.error_kind,
                error_code = excluded.error_code, error_message = excluded.error_message,
                started_at = excluded.started_at, finished_at = excluded.finished_at,
                completion_seq = excluded.completion_seq, node = excluded.node
            """)
        insertEvents = SQLiteRowsStatement(db, head: "INSERT INTO events (run_id, time, type, step, data_json) VALUES",
                                           row: "(?, ?, ?, ?, ?)", tail: "")
        deleteLease = try db.makeStatement(sql: "DELETE FROM leases WHERE holder = ?")
    }

    func isPrepared(on db: Database) -> Bool { connection == ObjectIdentifier(db) }
}

/// An INSERT of several rows at once (`VALUES (…), (…), …`), prepared per row count up to
/// `maxRows` when first needed.
///
/// Each execution of a statement has a fixed cost (reset, the VDBE's start and halt); a chain
/// step's commit writes two steps and two events, a fan-out's up to `--max-parallel` times that.
///
/// Rows are written in the order given, so a later row for the same key (an upsert) wins,
/// as with one statement a row.
final class SQLiteRowsStatement {
    static let maxRows = 16
    private unowned let db: Database
    private let head: String
    private let row: String
    private let tail: String
    /// Index n - 1: the statement for n rows.
    private var byRowCount: [Statement?] = Array(repeating: nil, count: maxRows)

    init(_ db: Database, head: String, row: String, tail: String) {
        self.db = db
        self.head = head
        self.row = row
        self.tail = tail
    }

    /// Writes `rows`, binding each row's values with `bind`.
    func write<Row>(_ rows: [Row], bind: (inout SQLiteBindings, Row) -> Void) throws {
        var start = rows.startIndex
        while start < rows.endIndex {
            let end = min(start + Self.maxRows, rows.endIndex)
            try statement(rows: end - start).run { bindings in
                for row in rows[start ..< end] { bind(&bindings, row) }
            }
            start = end
        }
    }

    private func statement(rows count: Int) throws -> Statement {
        if let statement = byRowCount[count - 1] { return statement }
        let sql = head + "\n" + Array(repeating: row, count: count).joined(separator: ",\n") + "\n" + tail
        let statement = try db.makeStatement(sql: sql)
        byRowCount[count - 1] = statement
        return statement
    }
}
