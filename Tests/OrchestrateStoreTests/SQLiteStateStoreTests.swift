import Foundation
@testable import OrchestrateStore
import OrchestrateTestSupport
import Testing

/// What only the SQLite store promises: private files in WAL mode, and safe concurrent opening.
@Suite struct SQLiteStateStoreTests {
    let dir = TemporaryDirectory("store")

    @Test func createsPrivateFilesInWALMode() throws {
        let stateDir = dir.file("state").path
        let store = try SQLiteStateStore(directory: stateDir)
        try store.createRun(RunRecord(id: "r1", workflowName: "wf", workflowFile: "/wf.yaml", workflowSource: "", inputs: [:],
                                      status: .queued, createdAt: 1, runDir: "runs/r1"), events: [])
        let dirMode = try FileManager.default.attributesOfItem(atPath: stateDir)[.posixPermissions] as! Int
        #expect(dirMode & 0o777 == 0o700)
        for name in ["state.sqlite", "state.sqlite-wal"] {
            let mode = try FileManager.default.attributesOfItem(atPath: stateDir + "/" + name)[.posixPermissions] as! Int
            #expect(mode & 0o777 == 0o600, "\(name) is \(String(mode, radix: 8))")
        }
        let journal = try ChildProcess.run(URL(fileURLWithPath: "/usr/bin/sqlite3"), [store.path, "PRAGMA journal_mode"])
        #expect(journal.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "wal")
        #expect(try store.integrityCheck() == "ok")
    }

    /// The level asked for is the one the writer connection commits with. A `synchronous` set
    /// while the pool prepares its connections is undone when the pool turns WAL on (it sets
    /// NORMAL): `ORCHESTRATE_SYNC=full` was once silently NORMAL that way.
    @Test func commitsAtTheSyncLevelAskedFor() throws {
        let levels: [(SQLiteStateStore.Synchronous?, Int)] = [(nil, 1), (.normal, 1), (.full, 2)]
        for (index, (level, pragma)) in levels.enumerated() {
            let directory = dir.file("sync-\(index)").path
            let store = try level.map { try SQLiteStateStore(directory: directory, synchronous: $0) }
                ?? SQLiteStateStore(directory: directory)
            let writer = try store.write { try Int.fetchOne($0, sql: "PRAGMA synchronous") }
            #expect(writer == pragma, "\(level.map(\.rawValue) ?? "default"): PRAGMA synchronous is \(writer ?? -1)")
        }
    }

    /// `syncJournal` (the barrier before a watch removes a file) fsyncs the WAL at either level:
    /// at FULL this process's commits are synced already, another's sharing the store may not be.
    @Test func syncJournalFsyncsTheWALAtEitherLevel() throws {
        for level in SQLiteStateStore.Synchronous.allCases {
            let store = try SQLiteStateStore(directory: dir.file("barrier-\(level.rawValue)").path, synchronous: level)
            try store.createRun(RunRecord(id: "r1", workflowName: "wf", workflowFile: "/wf.yaml", workflowSource: "", inputs: [:],
                                          status: .queued, createdAt: 1, runDir: "runs/r1"), events: [])
            try store.syncJournal()
            #expect(store.journalSyncs == 1, "\(level.rawValue)")
        }
    }

    /// The journal binds text by its length, so a NUL inside it (which PostgreSQL's text cannot
    /// hold) does not cut it short.
    @Test func journaledTextKeepsEmbeddedNULs() throws {
        let store = try SQLiteStateStore(directory: dir.file("nul").path)
        try store.createRun(RunRecord(id: "r1", workflowName: "wf", workflowFile: "/wf.yaml", workflowSource: "", inputs: [:],
                                      status: .running, createdAt: 1, runDir: "runs/r1"), events: [])
        var step = StepRecord(runID: "r1", id: "a", step: "a", kind: .step, status: .failed)
        step.errorMessage = "before\u{0}after"
        var batch = JournalBatch()
        batch.stepUpserts = [step]
        try store.commit(batch)
        #expect(try store.steps(ofRun: "r1").first?.errorMessage == "before\u{0}after")
    }

    /// SQLite reads bound text in place, from blocks that must not move or be freed before the
    /// statement has run (`SQLiteBoundText`): texts of every size — empty, larger than a block,
    /// many in one 16-row statement spanning several blocks — come back as written.
    @Test func journaledTextOfEverySizeComesBackAsWritten() throws {
        let store = try SQLiteStateStore(directory: dir.file("sizes").path)
        try store.createRun(RunRecord(id: "r1", workflowName: "wf", workflowFile: "/wf.yaml", workflowSource: "", inputs: [:],
                                      status: .running, createdAt: 1, runDir: "runs/r1"), events: [])
        let sizes = [0, 1, 15, 16, 100, 4095, 4096, 4097, 10_000, 300, 2000, 3000, 5, 70_000, 0, 40]
        var batch = JournalBatch()
        for (index, size) in sizes.enumerated() {
            var step = StepRecord(runID: "r1", id: "s\(index)", step: "s", kind: .step, status: .failed)
            step.errorMessage = String(repeating: Character(UnicodeScalar(UInt8(65 + index % 26))), count: size)
            step.idempotencyKey = ""
            step.outputs = ["text": .string(String(repeating: "é", count: size))]
            batch.stepUpserts.append(step)
            batch.events.append(EventRecord(runID: "r1", time: 1, type: EventType.stepFailed, step: step.id,
                                            data: ["error": .string(step.errorMessage!)]))
        }
        try store.commit(batch)
        let steps = Dictionary(uniqueKeysWithValues: try store.steps(ofRun: "r1").map { ($0.id, $0) })
        for written in batch.stepUpserts {
            let read = try #require(steps[written.id])
            #expect(read.errorMessage == written.errorMessage, "\(written.id): \(written.errorMessage!.count) bytes")
            #expect(read.outputs == written.outputs, "\(written.id)")
            #expect(read.idempotencyKey == "")
        }
        let events = try store.events(runID: "r1", afterSeq: 0, limit: 100)
        #expect(events.map { $0.data["error"]?.stringValue } == batch.events.map { $0.data["error"]?.stringValue })
    }

    /// Migration v10 rebuilds the events table without AUTOINCREMENT: every event keeps its seq
    /// and text, and the highest seq ever handed out stays taken even when its event was
    /// deleted before (a `run.deleted` event holds it), so the next event's seq is above it.
    @Test func eventsWithoutAutoincrementKeepEverySeqAndNeverReuseOne() throws {
        let stateDir = dir.file("v9").path
        let path = try SQLiteStateStore(directory: stateDir).path
        // The events table as migrations v1 and v9 left it, with the newest events (run `gone`)
        // deleted: sqlite_sequence remembers seq 4.
        let downgrade = try ChildProcess.run(URL(fileURLWithPath: "/usr/bin/sqlite3"), [path, """
            DROP TABLE events;
            CREATE TABLE events (seq INTEGER PRIMARY KEY AUTOINCREMENT, run_id TEXT, time REAL NOT NULL,
                                 type TEXT NOT NULL, step TEXT, data_json TEXT NOT NULL DEFAULT '{}');
            CREATE INDEX events_run ON events(run_id, seq);
            CREATE INDEX events_progress ON events(run_id, step, seq) WHERE type = 'step.progress';
            INSERT INTO events (run_id, time, type, step, data_json) VALUES
                ('r1', 1.5, 'run.added', NULL, '{}'), ('r1', 2.5, 'step.progress', 'up', '{"bytes":3}'),
                ('gone', 3.5, 'run.added', NULL, '{}'), ('gone', 4.5, 'run.finished', NULL, '{}');
            DELETE FROM events WHERE run_id = 'gone';
            DELETE FROM grdb_migrations WHERE identifier = 'v10 events without AUTOINCREMENT';
            """])
        #expect(downgrade.status == 0, "\(downgrade.stderr)")

        let store = try SQLiteStateStore(directory: stateDir)
        let kept = try store.events(runID: nil, afterSeq: 0, limit: 10)
        #expect(kept.map(\.seq) == [1, 2, 4])
        #expect(kept.map(\.type) == [.runAdded, .stepProgress, .runDeleted])
        #expect(kept[1].runID == "r1" && kept[1].step == "up" && kept[1].time == 2.5 && kept[1].data == ["bytes": 3])
        #expect(try store.latestProgress(runID: "r1").map(\.seq) == [2])
        try store.appendEvents([EventRecord(runID: "r1", time: 5, type: .runFinished)])
        #expect(try store.events(runID: nil, afterSeq: 4, limit: 10).map(\.seq) == [5])
        let schema = try ChildProcess.run(URL(fileURLWithPath: "/usr/bin/sqlite3"),
                                          [path, "SELECT sql FROM sqlite_master WHERE name = 'events'"])
        #expect(!schema.stdout.contains("AUTOINCREMENT"), "\(schema.stdout)")
        #expect(try store.integrityCheck() == "ok")
    }

    @Test func manyOpenersOfANewStoreAtOnceAllSucceed() throws {
        // Processes started together on a new state directory must not race to create the schema.
        for round in 0..<10 {
            let directory = dir.file("fresh-\(round)").path
            let failures = Collected<String>()
            DispatchQueue.concurrentPerform(iterations: 4) { _ in
                do { _ = try SQLiteStateStore(directory: directory) } catch { failures.add("\(error)") }
            }
            #expect(failures.all.isEmpty, "\(failures.all)")
        }
    }

    @Test func locationsParseAndHidePasswords() throws {
        #expect(try StoreLocation.parse("sqlite:/var/lib/o") == .sqlite(directory: "/var/lib/o"))
        #expect(try StoreLocation.parse("postgresql://orc@db/x") == .postgres(connection: "postgresql://orc@db/x"))
        #expect(try StoreLocation.parse("host=db dbname=x") == .postgres(connection: "host=db dbname=x"))
        #expect(throws: StoreLocation.Invalid.self) { try StoreLocation.parse("/just/a/dir") }
        #expect(throws: StoreLocation.Invalid.self) { try StoreLocation.parse("sqlite:") }
        #expect(ConnectionText.redacted("postgresql://orc:s3cret@db:5432/x?sslmode=verify-full") == "postgresql://orc:***@db:5432/x?sslmode=verify-full")
        #expect(ConnectionText.redacted("postgres://db/x?user=orc&password=s3cret&sslmode=require") == "postgres://db/x?user=orc&password=***&sslmode=require")
        #expect(ConnectionText.redacted(#"host=db password='it\'s s3cret' user=orc"#) == "host=db password=*** user=orc")
        #expect(ConnectionText.redacted("host=db password = s3cret user=orc") == "host=db password = *** user=orc")
        #expect(try StoreLocation.parse("postgresql://orc:pw@db/x").hasInlinePassword)
        #expect(try StoreLocation.parse("postgresql://orc@db/x").hasInlinePassword == false)
    }
}
