import Foundation
import OrchestrateJSON
import OrchestrateTestSupport
import Testing

/// `/api/schedules` and pause/resume over HTTP, checked against `orchestrate schedules`.
@Suite(.serialized) struct SchedulesAPITests {
    @Test func schedulesAreListedPausedAndResumed() throws {
        let serve = try APIServe()
        #expect(try serve.get("/api/schedules").json["schedules"] == [])
        try serve.registerSchedule("nightly-upload", entries: [#"{ cron: "0 3 * * *", timezone: Europe/Berlin }"#,
                                                               #"{ cron: "30 4 * * 1", timezone: UTC }"#])

        // Registered by the CLI, not through the API: the list read just before may be served
        // for up to 0.25 s more (ReadCache), then the new entries show.
        func listed() throws -> [JSONValue] { try serve.get("/api/schedules").json["schedules"]?.arrayValue ?? [] }
        #expect(try serve.waitFor(30) { try listed().count == 2 })
        let listed = try listed()
        try #require(listed.map { $0["entry"]?.intValue } == [1, 2])
        #expect(listed[0]["name"]?.stringValue == "nightly-upload" && listed[0]["cron"]?.stringValue == "0 3 * * *")
        #expect(listed[0]["timezone"]?.stringValue == "Europe/Berlin" && listed[0]["paused"] == .bool(false))
        #expect(listed.allSatisfy { $0["next"]?.stringValue?.hasSuffix("Z") == true })
        // The same documents as `schedules --json`.
        let cli = try serve.orchestrate(["schedules", "--json"]).stdout.split(separator: "\n").map { try JSONValue(parsing: String($0)) }
        #expect(cli == listed)

        let paused = try serve.post("/api/schedules/nightly-upload/pause")
        #expect(paused.status == 200 && paused.json == ["name": "nightly-upload", "paused": true], "\(paused.body)")
        let after = try #require(serve.get("/api/schedules").json["schedules"]?.arrayValue)
        #expect(after.allSatisfy { $0["paused"] == .bool(true) && $0["next"] == nil })
        #expect(try serve.orchestrate(["schedules"]).stdout.contains("next paused"))
        #expect(try serve.post("/api/schedules/nightly-upload/resume").json["paused"] == .bool(false))
        #expect(try serve.get("/api/schedules").json["schedules"]?.arrayValue?.allSatisfy { $0["paused"] == .bool(false) } == true)

        #expect(try serve.post("/api/schedules/nope/pause").status == 404)
        #expect(try serve.post("/api/schedules/nightly-upload/stop").status == 404)
        #expect(try serve.http.request("POST", "/api/schedules/nightly-upload/pause", token: serve.readerToken).status == 403)
    }
}
