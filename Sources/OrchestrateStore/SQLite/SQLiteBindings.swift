import GRDB
import OrchestrateJSON
#if canImport(GRDBSQLite)
import GRDBSQLite
#else
import SQLite3
#endif

/// The journal's hot statements, bound with `sqlite3_bind_*` and read with `sqlite3_column_*`
/// directly.
///
/// A chain step's commit runs seven statements. Through GRDB each pays for an array of
/// `DatabaseValue` boxes (`StatementArguments`), their validation against the statement, and
/// row decoding by `Row`: more work than SQLite's own, on the engine's hottest path. These
/// helpers take GRDB's prepared statement (`db.cachedStatement`) and drive its SQLite
/// handle themselves. GRDB's transaction observers do not see what they write (the store
/// registers none), so transactions themselves (BEGIN, COMMIT) stay GRDB's.
extension Statement {
    /// Binds the values `bind` adds, in order, steps the statement to its end and resets it.
    func run(_ bind: (inout SQLiteBindings) -> Void) throws {
        try withBound(bind) { handle in
            while true {
                let code = sqlite3_step(handle)
                if code == SQLITE_DONE { return }
                if code != SQLITE_ROW { throw failure(code) }
            }
        }
    }

    /// Binds the values `bind` adds and reads the first row with `read`; nil when there is none.
    func firstRow<T>(_ bind: (inout SQLiteBindings) -> Void, read: (SQLiteColumns) -> T) throws -> T? {
        try withBound(bind) { handle in
            let code = sqlite3_step(handle)
            if code == SQLITE_DONE { return nil }
            if code != SQLITE_ROW { throw failure(code) }
            return read(SQLiteColumns(handle: handle))
        }
    }

    /// Binds the values `bind` adds and calls `read` for every row.
    func forEachRow(_ bind: (inout SQLiteBindings) -> Void, read: (SQLiteColumns) throws -> Void) throws {
        try withBound(bind) { handle in
            while true {
                let code = sqlite3_step(handle)
                if code == SQLITE_DONE { return }
                if code != SQLITE_ROW { throw failure(code) }
                try read(SQLiteColumns(handle: handle))
            }
        }
    }

    private func withBound<T>(_ bind: (inout SQLiteBindings) -> Void, _ body: (OpaquePointer) throws -> T) throws -> T {
        let handle = sqliteStatement
        sqlite3_reset(handle)
        var bindings = SQLiteBindings(handle: handle)
        bind(&bindings)
        defer {
            // Reset, so the statement holds no read lock nor half-run state between commits,
            // and unbind, so a later use of the cached statement starts from nothing; only then
            // free the text SQLite was reading in place.
            sqlite3_reset(handle)
            sqlite3_clear_bindings(handle)
            bindings.text.release()
        }
        return try body(handle)
    }

    private func failure(_ code: CInt) -> DatabaseError {
        let connection = sqlite3_db_handle(sqliteStatement)
        return DatabaseError(resultCode: ResultCode(rawValue: sqlite3_extended_errcode(connection)),
                             message: String(cString: sqlite3_errmsg(connection)), sql: sql)
    }
}

/// The values of one execution of a statement, bound left to right (`?1`, `?2`, …). Text is
/// copied once, into `text`, and SQLite reads it there (`SQLITE_STATIC`) until the statement
/// is reset, so the Swift strings need not outlive the call.
struct SQLiteBindings {
    fileprivate let handle: OpaquePointer
    private var index: CInt = 0
    fileprivate var text = SQLiteBoundText()

    fileprivate init(handle: OpaquePointer) { self.handle = handle }

    mutating func add(_ value: String?) {
        index += 1
        guard var value else { sqlite3_bind_null(handle, index); return }
        let (copy, count) = value.withUTF8 { (text.copy($0), $0.count) }
        _ = sqlite3_bind_text(handle, index, copy.assumingMemoryBound(to: CChar.self), CInt(count), nil)
    }

    /// `value`'s JSON text (`jsonText`), bound from the encoder's bytes without making a String.
    mutating func add(json value: JSONValue?) {
        index += 1
        guard let value else { sqlite3_bind_null(handle, index); return }
        let bytes = value.jsonBytes
        let copy = bytes.withUnsafeBufferPointer { text.copy($0) }
        _ = sqlite3_bind_text(handle, index, copy.assumingMemoryBound(to: CChar.self), CInt(bytes.count), nil)
    }

    mutating func add<I: BinaryInteger>(_ value: I?) {
        index += 1
        if let value { sqlite3_bind_int64(handle, index, Int64(value)) } else { sqlite3_bind_null(handle, index) }
    }

    mutating func add(_ value: Double?) {
        index += 1
        if let value { sqlite3_bind_double(handle, index, value) } else { sqlite3_bind_null(handle, index) }
    }
}

/// The current row of a stepped statement, read by column position (0-based).
struct SQLiteColumns {
    fileprivate let handle: OpaquePointer

    func string(_ column: CInt) -> String? {
        guard sqlite3_column_type(handle, column) != SQLITE_NULL, let text = sqlite3_column_text(handle, column) else {
            return nil
        }
        let count = Int(sqlite3_column_bytes(handle, column))
        return String(decoding: UnsafeBufferPointer(start: text, count: count), as: UTF8.self)
    }

    func int64(_ column: CInt) -> Int64? {
        sqlite3_column_type(handle, column) == SQLITE_NULL ? nil : sqlite3_column_int64(handle, column)
    }

    func int(_ column: CInt) -> Int? { int64(column).map { Int($0) } }

    func double(_ column: CInt) -> Double? {
        sqlite3_column_type(handle, column) == SQLITE_NULL ? nil : sqlite3_column_double(handle, column)
    }
}

/// The text bound for one execution of a statement, in blocks that never move: SQLite reads
/// it in place (`SQLITE_STATIC`), which saves its own copy of each value, a `malloc` and a
/// `free` each (a fan-out round's 16-row upsert binds about 190 texts).
/// `release` frees the blocks once the statement is reset.
struct SQLiteBoundText {
    static let blockSize = 4096
    private var blocks: [UnsafeMutableRawPointer] = []
    private var used = 0
    private var capacity = 0

    /// A copy of `bytes` that stays where it is until `release`.
    mutating func copy(_ bytes: UnsafeBufferPointer<UInt8>) -> UnsafeRawPointer {
        // SQLite binds NULL for a nil pointer, even with length 0.
        guard let source = bytes.baseAddress, bytes.count > 0 else { return UnsafeRawPointer(emptyText.utf8Start) }
        if bytes.count > capacity - used {
            capacity = max(Self.blockSize, bytes.count)
            blocks.append(UnsafeMutableRawPointer.allocate(byteCount: capacity, alignment: 1))
            used = 0
        }
        let target = blocks[blocks.count - 1] + used
        target.copyMemory(from: source, byteCount: bytes.count)
        used += bytes.count
        return UnsafeRawPointer(target)
    }

    mutating func release() {
        for block in blocks { block.deallocate() }
        blocks.removeAll()
        used = 0
        capacity = 0
    }
}

/// Where an empty string's text points.
private let emptyText: StaticString = ""
