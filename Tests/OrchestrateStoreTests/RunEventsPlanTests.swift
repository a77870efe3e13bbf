import Foundation
import GRDB
@testable import OrchestrateStore
import OrchestrateTestSupport
import Testing

/// The plans each store makes for a run page's first read on a store where a session of many
/// files sits among other runs: along the run's index (events_run), never the primary key in seq
/// order filtered row by row (which reads every run's events from the page's start onwards).
@Suite(.serialized) struct RunEventsPlanTests {
    @Test func sqliteSearchesTheRunsIndex() throws {
        let dir = TemporaryDirectory("plan")
        let store = try SQLiteStateStore(directory: dir.file("state").path)
        try store.appendEvents((0 ..< 3000).map { n in
            EventRecord(runID: n % 3 == 0 ? "r\(n)" : "s", time: 1, type: n % 3 == 1 ? .itemAdded : .stepProgress, step: "a")
        })
        let plan = try store.read { db in
            try Row.fetchAll(db, sql: "EXPLAIN QUERY PLAN " + SQLiteStateStore.runEventsWithoutFiles, arguments: ["s", 0, 3000, 500])
                .map { $0["detail"] as String }
        }
        #expect(plan == ["SEARCH events USING INDEX events_run (run_id=? AND seq>?)"], "\(plan)")
    }


    @Test func aSessionsOtherEventsAreReadAlongTheRunsIndex() throws {
        let server = try PostgresServer.shared()
        let url = try server.createDatabase()
        let database = String(url.split(separator: "/").last!)
        _ = try PostgresStateStore(connection: url)  // the schema
        // 1,000 runs of 20 events, a session of 20,000 files (6 events each, a step.progress
        // every 1,000 files), 5,000 more runs; as ANALYZE sees them.
        try server.sql("""
            INSERT INTO events (run_id, time, type, step, data_json)
              SELECT 'r' || (g / 20), g, (ARRAY['run.added','step.started','step.progress','step.succeeded','run.finished'])[1 + g % 5], 'a', '{}'
              FROM generate_series(0, 19999) g;
            INSERT INTO events (run_id, time, type, step, data_json)
              SELECT 's', g, CASE WHEN g % 6000 = 5999 THEN 'step.progress'
                ELSE (ARRAY['watch.handed_over','item.added','item.started','item.progress','item.finished','watch.finished'])[1 + g % 6] END,
                'accept', '{}'
              FROM generate_series(0, 119999) g;
            INSERT INTO events (run_id, time, type, step, data_json)
              SELECT 'm' || (g / 20), g, (ARRAY['run.added','step.started','step.progress','step.succeeded','run.finished'])[1 + g % 5], 'a', '{}'
              FROM generate_series(0, 99999) g;
            ANALYZE events;
            """, database: database)
        let plan = try server.sql("PREPARE page(text, bigint, bigint, bigint) AS \(PostgresStateStore.runEventsWithoutFiles); "
                                  + "EXPLAIN EXECUTE page('s', 0, 240000, 500)", database: database)
        #expect(plan.contains("events_run") && !plan.contains("events_pkey"), "\(plan)")
        // And it reads what it should: the session's 20 step.progress events.
        let store = try PostgresStateStore(connection: url)
        let page = try store.storedEvents(runID: "s", afterSeq: 0, withoutFileEventsThrough: 240_000, limit: 500)
        #expect(page.count == 20 && page.allSatisfy { $0.type == .stepProgress })
    }
}
