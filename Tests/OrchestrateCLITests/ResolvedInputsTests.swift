import Foundation
import OrchestrateJSON
import OrchestrateTestSupport
import Testing

/// The host checks the *resolved* `with:` against the step type's schema at every attempt and
/// fills in its defaults, for every plugin (here the C fixture `test.typed`, which fills no
/// default itself).
@Suite struct ResolvedInputsTests {
    let h = Harness()

    @Test func aCPluginReceivesTheDefaultsItsSchemaDeclares() throws {
        let file = h.workflow("""
            version: 1
            name: defaults
            steps:
              typed:
                uses: test.typed
                with: { file: "\(h.path("marker"))" }
              seen:
                uses: test.append
                needs: [typed]
                with: { file: "\(h.path("seen"))", line: "with=${{ steps.typed.outputs.with }}" }
            """)
        let result = try h.orchestrate(["run", file])
        #expect(result.status == 0, "\(result.stdout)\n\(result.stderr)")
        #expect(h.lines("marker") == ["plain 3"])
        // Its `with` output is the inputs JSON exactly as the plugin received it.
        let seen = try JSONValue(parsing: String(h.read("seen").dropFirst("with=".count)))
        #expect(seen == ["file": .string(h.path("marker")), "count": 3, "label": "plain"])
    }

    @Test func aResolvedValueOfTheWrongTypeFailsBeforeThePluginRunsAndIsNotRetried() throws {
        // `validate` cannot know what steps.source.outputs.with.n will be; the host can.
        let file = h.workflow("""
            version: 1
            name: late-type
            steps:
              source:
                uses: test.echo
                with: { n: "abc" }
              upload:
                uses: test.typed
                needs: [source]
                with: { file: "\(h.path("marker"))", count: "${{ steps.source.outputs.with.n }}" }
                retry: { max_attempts: 3, initial_interval: 10ms }
            """)
        #expect(try h.orchestrate(["validate", file]).status == 0)
        let result = try h.orchestrate(["run", file, "--json"])
        #expect(result.status == 1)
        #expect(!FileManager.default.fileExists(atPath: h.path("marker")), "the plugin ran")
        let events = Harness.events(result)
        #expect(events.ofType("step.retrying").isEmpty)
        let failed = try #require(events.ofType("step.failed").first?["data"])
        #expect(failed["kind"]?.stringValue == "invalid-input")
        #expect(failed["code"]?.stringValue == "invalid_input")
        #expect(failed["error"]?.stringValue == #"step 'upload': input 'count' must be an integer, not a string ("abc")"#)
    }

    @Test func aConstraintIsCheckedOnTheResolvedValueAndASecretInTheMessageIsMasked() throws {
        let secret = "12345678901"
        let file = h.workflow("""
            version: 1
            name: late-minimum
            inputs:
              count: { type: integer, default: 0 }
            secrets:
              token: { env: TEST_TOKEN }
            steps:
              low:
                uses: test.typed
                with: { file: "\(h.path("low"))", count: "${{ inputs.count }}" }
                continue_on_error: true
              secret:
                uses: test.typed
                with: { file: "\(h.path("secret"))", count: "${{ secrets.token }}" }
                continue_on_error: true
            """)
        let result = try h.orchestrate(["run", file, "--json"], environment: ["TEST_TOKEN": secret])
        #expect(!FileManager.default.fileExists(atPath: h.path("low")) && !FileManager.default.fileExists(atPath: h.path("secret")))
        let failed = Dictionary(uniqueKeysWithValues: Harness.events(result).ofType("step.failed").compactMap { event in
            event["step"]?.stringValue.map { ($0, event["data"]?["error"]?.stringValue ?? "") }
        })
        #expect(failed["low"] == "step 'low': input 'count' must be at least 1, not 0")
        #expect(failed["secret"] == #"step 'secret': input 'count' must be an integer, not a string ("***")"#)
        #expect(!(result.stdout + result.stderr).contains(secret))
    }
}
