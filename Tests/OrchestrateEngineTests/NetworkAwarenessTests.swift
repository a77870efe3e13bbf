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
}
