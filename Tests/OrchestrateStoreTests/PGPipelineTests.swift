import Foundation
@testable import OrchestrateStore
import OrchestrateTestSupport
import Testing

/// `PGConnection.executePipeline`: the one-round-trip path of every journal commit on
/// PostgreSQL. Its promise is a transaction's: all statements or none, and a connection that
/// is still usable after a failure.
@Suite(.serialized) struct PGPipelineTests {
    func connection() throws -> PGConnection {
        let conn = try PGConnection(try PostgresServer.shared().createDatabase())
        try conn.executeScript("CREATE TABLE t (id INTEGER PRIMARY KEY, note TEXT NOT NULL)")
        return conn
    }

    func ids(_ conn: PGConnection) throws -> [Int] {
        try conn.execute("SELECT id FROM t ORDER BY id").all.compactMap { $0.int("id") }
    }

    @Test func theStatementsCommitTogetherAndReturnTheirRows() throws {
        let conn = try connection()
        let results = try conn.executePipeline([
            PGStatement("INSERT INTO t VALUES ($1, $2)", ["1", "one"]),
            PGStatement("INSERT INTO t VALUES ($1, $2)", ["2", "it's \"two\""]),
            PGStatement("SELECT note FROM t WHERE id = $1", ["2"]),
        ])
        #expect(results.count == 3)
        #expect(results[2][0].string("note") == "it's \"two\"")
        #expect(try ids(conn) == [1, 2])
    }

    @Test func aFailingStatementUndoesThoseBeforeItSkipsThoseAfterAndLeavesTheConnectionUsable() throws {
        let conn = try connection()
        do {
            try conn.executePipeline([
                PGStatement("INSERT INTO t VALUES ($1, $2)", ["1", "kept?"]),
                PGStatement("INSERT INTO t VALUES ($1, $2)", ["1", "duplicate key"]),
                PGStatement("INSERT INTO t VALUES ($1, $2)", ["3", "after the failure"]),
            ])
            Issue.record("a duplicate key must fail the pipeline")
        } catch let failure as PGConnection.Failure {
            #expect(failure.sqlState == "23505")
            #expect(!failure.connectionLost)
        }
        #expect(conn.isHealthy)
        #expect(try ids(conn).isEmpty)
        // Both ways of running statements still work on the same connection.
        try conn.executePipeline([PGStatement("INSERT INTO t VALUES ($1, $2)", ["4", "next"])])
        try conn.execute("INSERT INTO t VALUES ($1, $2)", ["5", "plain"])
        #expect(try ids(conn) == [4, 5])
    }

    /// A pipeline with its own BEGIN … COMMIT (a run's detail reads in one REPEATABLE READ
    /// snapshot) that fails inside the block must not leave the session in the aborted block.
    @Test func aFailureInsideAnExplicitBlockEndsTheBlock() throws {
        let conn = try connection()
        try conn.execute("INSERT INTO t VALUES ($1, $2)", ["1", "one"])
        do {
            try conn.executePipeline([
                PGStatement("BEGIN TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY", []),
                PGStatement("SELECT id FROM t WHERE id = $1", ["1"]),
                PGStatement("SELECT 1 / (id - 1) AS boom FROM t WHERE id = $1", ["1"]),
                PGStatement("COMMIT", []),
            ])
            Issue.record("a division by zero must fail the pipeline")
        } catch let failure as PGConnection.Failure {
            #expect(failure.sqlState == "22012")
        }
        #expect(conn.isHealthy)
        #expect(conn.isOutsideTransaction)
        try conn.execute("INSERT INTO t VALUES ($1, $2)", ["2", "after"])
        #expect(try ids(conn) == [1, 2])
    }

    @Test func theFenceFailsWithItsOwnStateUnlessEveryRunIsHeld() throws {
        let url = try PostgresServer.shared().createDatabase()
        let store = try PostgresStateStore(connection: url)
        for id in ["r1", "r2"] {
            try store.createRun(RunRecord(id: id, workflowName: "wf", workflowFile: "/wf.yaml", workflowSource: "", inputs: [:],
                                          status: .running, createdAt: 1, runDir: "runs/\(id)"), events: [])
            #expect(try store.claimRun(id, owner: .current, lease: 60))
        }
        let stranger = OwnerIdentity(node: "elsewhere", pid: 1, startTime: 1)
        let conn = try PGConnection(url)
        try conn.executePipeline([try #require(PostgresStateStore.fence([("r1", .current), ("r2", .current), ("r1", .current)]))])
        for fences in [[("r1", OwnerIdentity.current), ("r2", stranger)], [("r1", .current), ("r9", .current)]] {
            #expect {
                try conn.executePipeline([try #require(PostgresStateStore.fence(fences))])
            } throws: { error in
                (error as? PGConnection.Failure)?.sqlState == PostgresSchema.fenceFailedState
            }
        }
    }
}
