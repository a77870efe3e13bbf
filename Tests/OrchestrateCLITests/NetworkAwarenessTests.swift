import Foundation
import OrchestrateJSON
import OrchestrateTestSupport
import Testing

/// A host that stops answering holds the steps that talk to it, without spending their attempts,
/// until it answers again.
@Suite struct NetworkAwarenessTests {
    let h = Harness()

    /// A loopback port nobody listens on (yet).
    func freePort() throws -> Int {
        let result = try ChildProcess.run(URL(fileURLWithPath: "/usr/bin/env"), ["python3", "-c",
            "import socket; s = socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])"])
        return try #require(Int(result.stdout.trimmingCharacters(in: .whitespacesAndNewlines)))
    }

    @Test func aHostAwayForTwentySecondsIsWaitedForNotFailed() throws {
        let pluginDir = h.dir.file("network-plugin")
        try FileManager.default.createDirectory(at: pluginDir, withIntermediateDirectories: true)
        _ = try CCompiler.buildFixture("network", into: pluginDir)
        let port = try freePort()
        let file = h.workflow("""
            version: 1
            name: flaky-network
            steps:
              transfer:
                uses: test.connect
                with: { host: 127.0.0.1, port: \(port), log: "\(h.path("log"))" }
                retry: { max_attempts: 2, initial_interval: 100ms }
            """)
        let started = Date()
        let run = try h.start(["run", file, "--plugin-path", pluginDir.path])
        defer { if run.isRunning { kill(run.processIdentifier, SIGKILL) } }
        #expect(h.waitFor { ((try? h.runIDs()) ?? []).count == 1 })
        let runID = try #require(try h.runIDs().first)
        #expect(h.waitFor { (try? h.status(runID)["steps"]?[0]?["status"]?.stringValue) == "held" })

        // The host comes back after 20 s.
        Thread.sleep(forTimeInterval: max(0, 20 - Date().timeIntervalSince(started)))
        #expect(run.isRunning, "held, not failed, while the host is away")
        let listener = Process()
        listener.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        listener.arguments = ["python3", "-c", """
            import socket, time
            s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind(('127.0.0.1', \(port))); s.listen(8); s.settimeout(60)
            c, _ = s.accept(); c.close(); time.sleep(1)
            """]
        try listener.run()
        defer { listener.terminate() }
        run.waitUntilExit()
        #expect(run.terminationStatus == 0)
        #expect(h.lines("log") == ["connected"])
        let events = Harness.events(try h.orchestrate(["events", runID]))
        #expect(events.ofType("step.held").count >= 1)
        #expect(events.ofType("step.released").count == 1)
        #expect(events.ofType("step.failed").isEmpty)
        // It took several attempts, more than max_attempts: holding did not spend them.
        #expect(events.ofType("step.started").count >= 2)
    }

    @Test func anHTTPRequestToAHostThatIsNotUpYetIsHeldThenSucceeds() throws {
        let port = try freePort()
        let file = h.workflow("""
            version: 1
            name: http-hold
            steps:
              ping:
                uses: http.request
                with: { method: GET, url: "http://127.0.0.1:\(port)/" }
                retry: { max_attempts: 1 }
            outputs:
              status: "${{ steps.ping.outputs.status }}"
            """, name: "http.yaml")
        let run = try h.start(["run", file])
        defer { if run.isRunning { kill(run.processIdentifier, SIGKILL) } }
        #expect(h.waitFor { ((try? h.runIDs()) ?? []).count == 1 })
        let runID = try #require(try h.runIDs().first)
        #expect(h.waitFor { (try? h.status(runID)["steps"]?[0]?["status"]?.stringValue) == "held" },
                "max_attempts 1, yet a refused connection holds the step instead of failing it")
        // The server exits when its stdin closes: terminate() reaches only the python3 launcher
        // where python3 is a shim script (pyenv), which would leave the server running.
        let server = Process()
        let lifeline = Pipe()
        server.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        server.arguments = ["python3", "-c", """
            import functools, http.server, os, sys, threading
            threading.Thread(target=lambda: (sys.stdin.read(), os._exit(0)), daemon=True).start()
            handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=sys.argv[2])
            http.server.ThreadingHTTPServer(('127.0.0.1', int(sys.argv[1])), handler).serve_forever()
            """, "\(port)", h.dir.path]
        server.standardInput = lifeline
        server.standardOutput = FileHandle.nullDevice
        server.standardError = FileHandle.nullDevice
        try server.run()
        defer {
            try? lifeline.fileHandleForWriting.close()
            server.terminate()
        }
        run.waitUntilExit()
        #expect(run.terminationStatus == 0)
        #expect(try h.status(runID)["outputs"]?["status"] == .int(200))
    }

    /// A host that never answers: the hold is bounded. With `hold_timeout: 5s` the step fails with
    /// the code `unreachable` and the run's `on_finish` hook fires; meanwhile it says every
    /// ORCHESTRATE_HOLD_REPORT_SECONDS that it still waits (a line, an event), and `status`
    /// shows the same line (its JSON is what the API and the dashboard read).
    @Test func aHostThatNeverAnswersFailsAfterItsHoldTimeoutAndTheHooksFire() throws {
        let pluginDir = h.dir.file("network-plugin")
        try FileManager.default.createDirectory(at: pluginDir, withIntermediateDirectories: true)
        _ = try CCompiler.buildFixture("network", into: pluginDir)
        let port = try freePort()
        let file = h.workflow("""
            version: 1
            name: night-job
            defaults:
              hold_timeout: 1h
            steps:
              transfer:
                uses: test.connect
                with: { host: 127.0.0.1, port: \(port), log: "\(h.path("log"))" }
                timeout: 8s
                hold_timeout: 5s
            on_finish:
              - when: [failed]
                uses: exec
                with:
                  command: [sh, -c, 'echo "alert $STATUS: $ERR" >> "$OUT"']
                  env: { STATUS: "${{ run.status }}", ERR: "${{ run.error }}", OUT: "\(h.path("alerts"))" }
            """)
        let started = Date()
        let finished = DispatchSemaphore(value: 0)
        let outcome = ResultBox()
        let harness = h
        DispatchQueue.global().async {
            outcome.set(try? harness.orchestrate(["run", file, "--plugin-path", pluginDir.path],
                                                 environment: ["ORCHESTRATE_HOLD_REPORT_SECONDS": "1"]))
            finished.signal()
        }
        #expect(h.waitFor { ((try? h.runIDs()) ?? []).count == 1 })
        let runID = try #require(try h.runIDs().first)
        // Without a bounded hold the run would wait forever: cancel it rather than leave it behind.
        defer { _ = try? h.orchestrate(["cancel", runID]) }
        // While held, status (text and JSON) says what it waits for, and until when.
        #expect(h.waitFor(4) {
            (try? h.status(runID)["steps"]?[0]?["error"]?.stringValue)?.contains("still waiting for 127.0.0.1:\(port): connection refused; next probe in") == true
        }, "\((try? h.status(runID))?.jsonText ?? "")")
        let text = try h.orchestrate(["status", runID])
        #expect(text.stdout.contains("held") && text.stdout.contains("gives up at"), "\(text.stdout)")
        #expect(finished.wait(timeout: .now() + 30) == .success, "the run ended")
        let elapsed = Date().timeIntervalSince(started)
        let result = try #require(outcome.get())
        #expect(result.status == 1, "\(result.stdout)\n\(result.stderr)")
        #expect(elapsed >= 5 && elapsed < 20, "failed after its hold_timeout: \(elapsed) s")
        #expect(result.stdout.contains("still waiting for 127.0.0.1:\(port)"), "the periodic line: \(result.stdout)")
        let events = Harness.events(try h.orchestrate(["events", runID, "--json"]))
        let stillHeld = events.ofType("step.still_held")
        #expect(stillHeld.count >= 3, "about one a second for 5 s: \(stillHeld.count)")
        #expect(stillHeld.first?["data"]?["host"]?.stringValue == "127.0.0.1:\(port)")
        #expect(stillHeld.first?["data"]?["gives_up_at"]?.doubleValue != nil)
        let failed = try #require(events.ofType("step.failed").first)
        #expect(failed["data"]?["code"]?.stringValue == "unreachable")
        #expect(failed["data"]?["error"]?.stringValue?.contains("did not answer for 5s (hold_timeout)") == true, "\(failed.jsonText)")
        #expect(events.ofType("hook.succeeded").count == 1)
        #expect(h.read("alerts").contains("alert failed: step 'transfer' failed"), "\(h.read("alerts"))")
        #expect(h.read("log").isEmpty, "never connected")
    }

    /// A host name that does not resolve (`.invalid` never does) is held like a host that is
    /// down, and what it says names the cause: the name does not resolve.
    @Test func aNameThatDoesNotResolveSaysSo() throws {
        let file = h.workflow("""
            version: 1
            name: typo
            steps:
              ping:
                uses: http.request
                with: { method: GET, url: "http://nothing-here.invalid:8080/" }
                hold_timeout: 3s
            """, name: "typo.yaml")
        let result = try h.orchestrate(["run", file], environment: ["ORCHESTRATE_HOLD_REPORT_SECONDS": "1"])
        #expect(result.status == 1)
        #expect(result.stdout.contains("still waiting for nothing-here.invalid:8080: nothing-here.invalid does not resolve"),
                "\(result.stdout)")
        let runID = try #require(try h.runIDs().first)
        let step = try #require(try h.status(runID)["steps"]?[0])
        #expect(step["status"]?.stringValue == "failed")
        #expect(step["error"]?.stringValue?.contains("nothing-here.invalid does not resolve") == true, "\(step.jsonText)")
    }
}

/// The result of a command run on another thread.
private final class ResultBox: @unchecked Sendable {
    private let lock = NSLock()
    private var result: ProcessResult?
    func set(_ value: ProcessResult?) { lock.withLock { result = value } }
    func get() -> ProcessResult? { lock.withLock { result } }
}
