import Foundation
import OrchestrateJSON
import OrchestrateTestSupport
import Testing

/// The workflow language end to end: for_each, if, skip propagation, continue_on_error,
/// typed expressions, idempotency keys, outputs.
@Suite struct WorkflowFeatureTests {
    let h = Harness()

    @Test func languageFeaturesRunAsDocumented() throws {
        let out = h.path("out")
        let file = h.workflow("""
            version: 1
            name: features
            inputs:
              flag: { type: boolean, default: false }
              size: { type: integer, required: true }
            steps:
              list:
                uses: test.echo
                with: { files: [a, b, c], size: "${{ inputs.size }}" }
              each:
                needs: [list]
                uses: test.append
                for_each: "${{ steps.list.outputs.with.files }}"
                max_parallel: 2
                with: { file: "\(out)", line: "item ${{ item }}" }
              gated:
                needs: [each]
                if: inputs.flag
                uses: test.noop
              after_gated:
                needs: [gated]
                uses: test.noop
              may_fail:
                needs: [each]
                uses: test.fail
                with: { kind: permanent, message: boom }
                continue_on_error: true
              final:
                needs: [may_fail]
                uses: test.echo
                idempotency_key: "${{ run.id }}/final"
                with:
                  count: "${{ length(steps.each.outputs) }}"
                  doubled: "${{ steps.list.outputs.with.size * 2 }}"
                  status: "${{ steps.may_fail.status }}"
            outputs:
              count: "${{ steps.final.outputs.with.count }}"
              doubled: "${{ steps.final.outputs.with.doubled }}"
              key: "${{ steps.final.outputs.idempotency_key }}"
              status: "${{ steps.final.outputs.with.status }}"
            """)
        let result = try h.orchestrate(["run", file, "--input", "size=21", "--json"])
        #expect(result.status == 0, "\(result.stdout)\n\(result.stderr)")
        #expect(h.lines("out").sorted() == ["item a", "item b", "item c"])
        let runID = try #require(try h.runIDs().first)
        let status = try h.status(runID)
        let outputs = status["outputs"]
        #expect(outputs?["count"] == .int(3), "a whole-string expression keeps its type")
        #expect(outputs?["doubled"] == .int(42))
        #expect(outputs?["key"] == .string("\(runID)/final"))
        #expect(outputs?["status"] == .string("failed"))
        let steps = Dictionary(uniqueKeysWithValues: (status["steps"]?.arrayValue ?? []).map { ($0["id"]!.stringValue!, $0) })
        #expect(steps["gated"]?["status"]?.stringValue == "skipped")
        #expect(steps["after_gated"]?["status"]?.stringValue == "skipped")
        #expect(steps["may_fail"]?["status"]?.stringValue == "failed")
        #expect(steps["each[2]"]?["status"]?.stringValue == "succeeded")
        #expect(steps["final"]?["idempotency_key"]?.stringValue == "\(runID)/final")

        // The same flag flipped: the gated branch runs.
        let again = try h.orchestrate(["run", file, "--input", "size=1", "--input", "flag=true"])
        #expect(again.status == 0)
        let secondRun = try #require(try h.runIDs().last)
        let secondSteps = Dictionary(uniqueKeysWithValues: (try h.status(secondRun)["steps"]?.arrayValue ?? []).map {
            ($0["id"]!.stringValue!, $0["status"]?.stringValue)
        })
        #expect(secondSteps["gated"] == "succeeded")
        #expect(secondSteps["after_gated"] == "succeeded")
    }

    @Test func badInputsAreUsageErrors() throws {
        let file = h.workflow("""
            version: 1
            name: inputs
            inputs:
              size: { type: integer, required: true }
            steps:
              one: { uses: test.noop }
            """)
        let missing = try h.orchestrate(["run", file])
        #expect(missing.status == 2)
        #expect(missing.stderr.contains("size"))
        let wrong = try h.orchestrate(["run", file, "--input", "size=big"])
        #expect(wrong.status == 2)
        #expect(try h.runIDs().isEmpty, "nothing is journaled for a run that never started")
    }

    @Test func anInvalidWorkflowExits2WithLocatedErrors() throws {
        let file = h.workflow("""
            version: 1
            name: broken
            steps:
              a: { uses: test.noop, needs: [b] }
              b: { uses: test.nope, needs: [a] }
            """)
        let result = try h.orchestrate(["run", file])
        #expect(result.status == 2)
        #expect(result.stderr.contains("wf.yaml:5:"))
        #expect(result.stderr.contains("unknown step type 'test.nope'"))
        #expect(result.stderr.contains("cycle"))
        let validate = try h.orchestrate(["validate", file])
        #expect(validate.status == 2)
        #expect(validate.stderr == result.stderr)
    }

    @Test func graphAndPluginsDescribeTheWorkflowAndSteps() throws {
        let file = h.workflow("""
            version: 1
            name: graph
            steps:
              a: { uses: test.noop, compensate: { uses: test.noop } }
              b: { uses: test.noop, needs: [a] }
            """)
        let mermaid = try h.orchestrate(["graph", file])
        #expect(mermaid.status == 0)
        #expect(mermaid.stdout.contains("s_a --> s_b"))
        #expect(mermaid.stdout.contains("s_a -.-> s_a_undo"))
        let dot = try h.orchestrate(["graph", file, "--format", "dot"])
        #expect(dot.stdout.contains("\"a\" -> \"b\";"))
        let list = try h.orchestrate(["plugins", "list"])
        #expect(list.stdout.contains("test.flaky"))
        #expect(list.stdout.contains("fs.copy"), "the built-in plugins are found beside the executable")
        #expect(list.stdout.contains("exec"))
        let inspect = try h.orchestrate(["plugins", "inspect", "test.flaky"])
        #expect(inspect.stdout.contains("counter_file"))
    }

    @Test func onFinishHooksRunForTheMatchingOutcome() throws {
        let notes = h.path("notes")
        let file = h.workflow("""
            version: 1
            name: hooks
            inputs:
              fail: { type: boolean, default: false }
            secrets:
              token: { env: HOOK_TOKEN }
            steps:
              ok: { uses: test.noop }
              boom:
                needs: [ok]
                if: inputs.fail
                uses: test.fail
                with: { kind: permanent, message: "it broke" }
            on_finish:
              - when: succeeded
                uses: exec
                with:
                  command: [sh, -c, 'echo "ok $RUN $STATUS" >> "$OUT"']
                  env: { RUN: "${{ run.id }}", STATUS: "${{ run.status }}", OUT: "\(notes)" }
              - when: [failed, cancelled]
                uses: exec
                with:
                  command: [sh, -c, 'echo "alert $STATUS $ERR token=$TOKEN" >> "$OUT"']
                  env: { STATUS: "${{ run.status }}", ERR: "${{ run.error }}", OUT: "\(notes)", TOKEN: "${{ secrets.token }}" }
              - uses: exec
                with: { command: [sh, -c, "exit 3"] }
            """)
        let env = ["HOOK_TOKEN": "hook-secret-1234"]
        let good = try h.orchestrate(["run", file, "--json"], environment: env)
        #expect(good.status == 0, "a failing hook does not fail the run: \(good.stderr)")
        let goodRun = try #require(try h.runIDs().first)
        #expect(h.lines("notes") == ["ok \(goodRun) succeeded"])
        let events = Harness.events(good)
        #expect(events.ofType("hook.succeeded").count == 1)
        #expect(events.ofType("hook.failed").first?["step"]?.stringValue == "on_finish[2]")

        let bad = try h.orchestrate(["run", file, "--input", "fail=true"], environment: env)
        #expect(bad.status == 1)
        let alert = try #require(h.lines("notes").last)
        #expect(alert.hasPrefix("alert failed step 'boom' failed after 1 attempt (not retried: permanent error; "
            + "only retryable and timeout errors are retried): it broke"), "\(alert)")
        #expect(alert.hasSuffix("token=hook-secret-1234"), "the hook got the secret itself")
        #expect(!bad.stdout.contains("hook-secret-1234"))
    }
}
