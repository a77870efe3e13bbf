import Foundation
import OrchestrateJSON
import OrchestrateTestSupport
import Testing

/// `isolation: process`: the plugin runs in `orchestrate-plugin-runner`, so one that segfaults,
/// aborts, leaks or ignores cancellation fails only its step; everything a plugin does through
/// the ABI (logs, outputs, checkpoints, items) works the same through the runner.
@Suite struct IsolationTests {
    let h = Harness()

    func brokenPlugins() throws -> String {
        let dir = h.dir.file("broken-plugins")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        _ = try CCompiler.buildFixture("broken", into: dir)
        return dir.path
    }

    @Test func crashingAbortingLeakingAndHangingPluginsFailOnlyTheirSteps() throws {
        let plugins = try brokenPlugins()
        let file = h.workflow("""
            version: 1
            name: contained
            defaults:
              retry: { max_attempts: 1 }
            steps:
              segfault: { uses: broken.segfault, isolation: process, continue_on_error: true }
              abort: { uses: broken.abort, isolation: process, continue_on_error: true }
              leak: { uses: broken.leak, isolation: process, continue_on_error: true }
              hang: { uses: broken.hang, isolation: process, timeout: 300ms, continue_on_error: true }
              fine: { uses: test.echo, with: { v: 1 } }
            outputs:
              statuses: "${{ format('{0} {1} {2} {3} {4}', steps.segfault.status, steps.abort.status, steps.leak.status, steps.hang.status, steps.fine.status) }}"
            """)
        let started = Date()
        let result = try h.orchestrate(["run", file, "--plugin-path", plugins, "--json", "--max-parallel", "8"],
                                       environment: ["ORCHESTRATE_RUNNER_MEMORY_LIMIT": "\(512 << 20)"])
        #expect(result.status == 0, "the engine carried on: \(result.stderr)")
        #expect(!result.signalled)
        #expect(Date().timeIntervalSince(started) < 30)
        let failed = Dictionary(uniqueKeysWithValues: Harness.events(result).ofType("step.failed").compactMap { e in
            e["step"]?.stringValue.map { ($0, e["data"] ?? .null) }
        })
        #expect(failed["segfault"]?["code"]?.stringValue == "plugin_crashed")
        #expect(failed["segfault"]?["error"]?.stringValue?.contains("signal 11") == true)
        #expect(failed["abort"]?["error"]?.stringValue?.contains("signal 6") == true)
        #expect(failed["leak"]?["code"]?.stringValue == "plugin_crashed", "the memory limit stopped the leak")
        #expect(failed["hang"]?["kind"]?.stringValue == "timeout")
        #expect(failed["hang"]?["error"]?.stringValue?.contains("was killed") == true)
        let runID = try #require(try h.runIDs().first)
        #expect(try h.status(runID)["outputs"]?["statuses"]?.stringValue == "failed failed failed failed succeeded")
    }

    @Test func aCrashIsRetryableUnlessTheWorkflowSaysOtherwise() throws {
        let plugins = try brokenPlugins()
        let file = h.workflow("""
            version: 1
            name: crash-retries
            steps:
              retried: { uses: broken.segfault, isolation: process, retry: { max_attempts: 3, initial_interval: 10ms } }
            """)
        let result = try h.orchestrate(["run", file, "--plugin-path", plugins, "--json"])
        #expect(result.status == 1)
        #expect(Harness.events(result).ofType("step.started").count == 3)

        let permanent = h.workflow("""
            version: 1
            name: crash-no-retry
            steps:
              once:
                uses: broken.segfault
                isolation: process
                retry: { max_attempts: 3, initial_interval: 10ms, non_retryable: [plugin_crashed] }
            """, name: "permanent.yaml")
        let once = try h.orchestrate(["run", permanent, "--plugin-path", plugins, "--json"])
        #expect(once.status == 1)
        #expect(Harness.events(once).ofType("step.started").count == 1)
    }

    @Test func checkpointsItemsAndOutputsWorkThroughTheRunnerAcrossAKill() throws {
        let file = h.workflow("""
            version: 1
            name: isolated-resume
            steps:
              ticks:
                uses: test.checkpoint
                isolation: process
                with: { file: "\(h.path("ticks"))", count: 25, delay_ms: 60 }
              echo: { uses: test.echo, isolation: process, needs: [ticks], idempotency_key: k, with: { n: 7 } }
            outputs:
              echoed: "${{ steps.echo.outputs.with.n }}"
              key: "${{ steps.echo.outputs.idempotency_key }}"
            """)
        let process = try h.start(["run", file])
        #expect(h.waitFor { h.lines("ticks").count >= 8 })
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
        let runID = try #require(try h.runIDs().first)
        let resumed = try h.orchestrate(["resume", runID, "--isolation", "process"])
        #expect(resumed.status == 0, "\(resumed.stdout)\n\(resumed.stderr)")
        let ticks = h.lines("ticks").compactMap { Int($0) }
        #expect(Set(ticks) == Set(0..<25))
        #expect(ticks.count <= 26, "resumed from the checkpoint saved through the runner")
        let status = try h.status(runID)
        #expect(status["outputs"]?["echoed"] == .int(7))
        #expect(status["outputs"]?["key"] == .string("k"))
    }

    @Test func theGlobalDefaultIsolatesEveryStep() throws {
        let plugins = try brokenPlugins()
        let file = h.workflow("""
            version: 1
            name: default-isolation
            steps:
              crash: { uses: broken.abort, retry: { max_attempts: 1 } }
            """)
        // No `isolation:` in the workflow: --isolation process (or ORCHESTRATE_ISOLATION) contains it.
        let result = try h.orchestrate(["run", file, "--plugin-path", plugins], environment: ["ORCHESTRATE_ISOLATION": "process"])
        #expect(result.status == 1)
        #expect(!result.signalled)
        #expect(result.stdout.contains("died of signal 6"))
        let bad = try h.orchestrate(["run", file, "--plugin-path", plugins, "--isolation", "sandboxed"])
        #expect(bad.status == 2)
    }
}
