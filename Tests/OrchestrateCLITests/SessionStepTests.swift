import Foundation
import OrchestrateJSON
import OrchestrateTestSupport
import Testing

/// Session steps (ABI 1.1, e.g. `sftp.connect`): closed once nothing needs them, and opened again
/// on resume because a connection does not survive its process.
@Suite(.serialized) struct SessionStepTests {
    let h = Harness()

    func setUp() throws -> (workflow: String, env: [String: String], pluginDir: String) {
        let dir = h.dir.file("session-plugin")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        _ = try CCompiler.buildFixture("sessions", into: dir)
        let log = h.path("log")
        let workflow = h.workflow("""
            version: 1
            name: sessions
            steps:
              connect: { uses: test.session-open, with: { log: "\(log)" } }
              first:
                needs: [connect]
                uses: test.session-use
                with: { log: "\(log)", session: "${{ steps.connect.outputs.session }}", ms: 1500 }
              second:
                needs: [first, connect]
                uses: test.session-use
                with: { log: "\(log)", session: "${{ steps.connect.outputs.session }}" }
              after:
                needs: [second]
                uses: test.sleep
                with: { ms: 300 }
            """)
        return (workflow, ["SESSIONS_TEST_LOG": log], dir.path)
    }

    @Test func aSessionIsClosedOnceNoStepNeedsIt() throws {
        let (workflow, env, plugins) = try setUp()
        let result = try h.orchestrate(["run", workflow, "--plugin-path", plugins, "--json"], environment: env)
        #expect(result.status == 0, "\(result.stdout)\n\(result.stderr)")
        let log = h.lines("log")
        #expect(log.count == 4)
        #expect(log.first?.hasPrefix("open ") == true)
        let id = String(log[0].dropFirst(5))
        #expect(log == ["open \(id)", "use \(id)", "use \(id)", "close \(id)"])
        // Closed when `second` finished, before `after` did.
        let events = Harness.events(result)
        let closed = events.firstIndex { $0["type"]?.stringValue == "session.closed" }
        let afterDone = events.firstIndex { $0["type"]?.stringValue == "step.succeeded" && $0["step"]?.stringValue == "after" }
        #expect(closed != nil && afterDone != nil && closed! < afterDone!)
    }

    @Test func aSessionIsOpenedAgainWhenTheRunResumes() throws {
        let (workflow, env, plugins) = try setUp()
        let process = try h.start(["run", workflow, "--plugin-path", plugins], environment: env)
        #expect(h.waitFor { h.lines("log").contains { $0.hasPrefix("use ") } })
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
        let runID = try #require(try h.runIDs().first)
        let resumed = try h.orchestrate(["resume", runID, "--plugin-path", plugins], environment: env)
        #expect(resumed.status == 0, "\(resumed.stdout)\n\(resumed.stderr)")
        let log = h.lines("log")
        let opens = log.filter { $0.hasPrefix("open ") }
        #expect(opens.count == 2, "the connect step ran again on resume: \(log)")
        let second = String(opens[1].dropFirst(5))
        #expect(log.suffix(3) == ["use \(second)", "use \(second)", "close \(second)"])
    }
}
