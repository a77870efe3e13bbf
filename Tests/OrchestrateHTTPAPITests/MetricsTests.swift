import Foundation
import OrchestrateJSON
import OrchestrateTestSupport
import Testing

/// `/metrics` of a real `serve` after real runs, parsed by prometheus_client's text parser
/// (PyPI), agrees with the journal (`orchestrate events --json`): attempts, failures by kind
/// and code, bytes moved, durations, queue waits, finished runs, and the store's counts.
@Suite(.serialized) struct MetricsTests {
    @Test func metricsAgreeWithTheJournal() throws {
        let serve = try APIServe()
        let counter = serve.dir.file("flaky-count").path
        let workflows = [
            // Bytes moved: two transfers of known size (the test plugin's metered step).
            "version: 1\nname: moved\nsteps:\n  a: { uses: test.metered, with: { bytes: 300000, chunk: 50000 } }\n  b: { uses: test.metered, with: { bytes: 70000 }, needs: [a] }\n",
            // Two failed attempts with a code, then success.
            "version: 1\nname: flaky\nsteps:\n  f:\n    uses: test.flaky\n    with: { counter_file: \"\(counter)\", fail_times: 2, code: E_BUSY }\n    retry: { max_attempts: 3, initial_interval: 10ms }\n",
            // A permanent failure: the run fails.
            "version: 1\nname: broken\nsteps:\n  x: { uses: test.fail, with: { kind: permanent, message: no, code: E_GONE } }\n",
            "version: 1\nname: quick\nsteps:\n  n: { uses: test.noop }\n",
        ]
        var ids: [String] = []
        for yaml in workflows {
            let reply = try serve.post("/api/runs", ["workflow_yaml": .string(yaml)])
            #expect(reply.status == 201, "\(reply.body)")
            ids.append(try #require(reply.json["id"]?.stringValue))
        }
        #expect(try serve.waitFor(60) { try ids.allSatisfy { ["succeeded", "failed"].contains(try serve.status($0) ?? "") } })

        #expect(try serve.http.request("GET", "/metrics", token: nil).status == 401)
        let scrape = try serve.http.request("GET", "/metrics", token: serve.readerToken)
        #expect(scrape.status == 200)
        #expect(scrape.headers["content-type"]?.hasPrefix("text/plain; version=0.0.4") == true)
        let metrics = serve.dir.write("metrics.txt", scrape.body).path
        let events = try serve.orchestrate(["events", "--json"])
        #expect(events.status == 0)
        let journal = serve.dir.write("events.jsonl", events.stdout).path
        let check = try PythonVenv.run("metrics_check.py", [metrics, journal])
        #expect(check.status == 0, "\(check.stdout)\(check.stderr)")
        // The figures the check rests on are really there (not an empty scrape agreeing with nothing).
        #expect(scrape.body.contains("orchestrate_bytes_moved_total{direction=\"local\",plugin=\"test\"} 370000"), "\(scrape.body)")
        #expect(scrape.body.contains("E_BUSY") && scrape.body.contains("E_GONE"))
        #expect(scrape.body.contains("orchestrate_runs{queue=\"default\",status=\"succeeded\"} 3"), "\(scrape.body)")
    }

    /// A persistent session's files (the C fixture `test.items`, each "moving" 1,000,000 bytes
    /// over 3 s with item progress): `GET /api/runs/{id}` shows the file being moved `running`
    /// with its size, bytes and rate, and the run's `transfer.bytes_done` the session's bytes;
    /// `orchestrate_bytes_moved_total` counts them.
    @Test func aSessionsBytesAreInTheRunsDetailAndInBytesMoved() throws {
        let serve = try APIServe()
        let received = serve.dir.file("received").path
        let yaml = "version: 1\nname: session\nsteps:\n  accept: { uses: test.items, with: { file: \"\(received)\", item_ms: 3000 } }\n"
        let reply = try serve.post("/api/runs", ["workflow_yaml": .string(yaml)])
        #expect(reply.status == 201, "\(reply.body)")
        let id = try #require(reply.json["id"]?.stringValue)
        #expect(try serve.waitFor(30) { try serve.status(id) == "running" })
        for name in ["a", "b"] {
            let added = try serve.orchestrate(["add-path", id, "/data/\(name).mov", "in/\(name).mov"])
            #expect(added.status == 0, "\(added.stderr)")
        }
        var seen: JSONValue = .null
        #expect(try serve.waitFor(20) {
            seen = try serve.get("/api/runs/\(id)").json
            let running = seen["items"]?.arrayValue?.first { $0["status"]?.stringValue == "running" }
            return (running?["rate"]?.doubleValue ?? 0) > 0
        }, "no file running with a rate: \(seen.jsonText)")
        let running = try #require(seen["items"]?.arrayValue?.first { $0["status"]?.stringValue == "running" })
        #expect(running["bytes_total"]?.intValue == 1_000_000 && (running["bytes_done"]?.intValue ?? 0) > 0, "\(running.jsonText)")
        #expect(try serve.waitFor(30) { try serve.get("/api/runs/\(id)").json["transfer"]?["bytes_done"]?.intValue == 2_000_000 },
                "\((try? serve.get("/api/runs/\(id)").body) ?? "")")
        #expect(try serve.post("/api/runs/\(id)/close").status < 300)
        #expect(try serve.waitFor(30) { try serve.status(id) == "succeeded" })
        let scrape = try serve.http.request("GET", "/metrics", token: serve.readerToken).body
        #expect(scrape.contains("orchestrate_bytes_moved_total{direction=\"local\",plugin=\"test\"} 2000000"), "\(scrape)")
    }

    /// A step held because its host does not answer counts in `orchestrate_steps_held` while it
    /// waits, and the run's detail (what the dashboard reads) shows it held with the reason;
    /// once the run is cancelled the gauge is back to 0.
    @Test func aStepHeldOnAHostThatDoesNotAnswerIsCountedInTheHeldGauge() throws {
        let serve = try APIServe()
        let port = Ports.free()
        let yaml = "version: 1\nname: held\nsteps:\n  ping:\n    uses: http.request\n"
            + "    with: { method: GET, url: \"http://127.0.0.1:\(port)/\" }\n    hold_timeout: 10m\n"
        let reply = try serve.post("/api/runs", ["workflow_yaml": .string(yaml)])
        #expect(reply.status == 201, "\(reply.body)")
        let id = try #require(reply.json["id"]?.stringValue)
        func scrape() throws -> String { try serve.http.request("GET", "/metrics", token: serve.readerToken).body }
        func held() throws -> Double? {
            try scrape().split(separator: "\n").first { $0.hasPrefix("orchestrate_steps_held ") }
                .flatMap { Double($0.dropFirst("orchestrate_steps_held ".count)) }
        }
        #expect(try serve.waitFor(30) { try held() == 1 }, "\((try? scrape()) ?? "")")
        let step = try #require(try serve.get("/api/runs/\(id)").json["steps"]?[0])
        #expect(step["status"]?.stringValue == "held")
        #expect(step["error"]?.stringValue?.contains("127.0.0.1:\(port)") == true, "\(step.jsonText)")
        #expect(try serve.post("/api/runs/\(id)/cancel").status < 300)
        #expect(try serve.waitFor(30) { try serve.status(id) == "cancelled" })
        #expect(try serve.waitFor(10) { try held() == 0 })
    }
}
