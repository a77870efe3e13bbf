// `on.schedule` in a workflow: what it parses into, and every mistake reported at its place.
import Foundation
import OrchestrateJSON
import OrchestrateModel
import Testing

private func workflow(_ on: String, inputs: String = "  source: { type: path, required: true }\n  note: { type: string, default: x }") -> String {
    """
    version: 1
    name: nightly
    inputs:
    \(inputs)
    on:
    \(on)
    steps:
      a: { uses: test.noop }
    """
}

private func errors(_ source: String) -> [String] {
    do {
        _ = try WorkflowLoader.parse(source: source, file: "w.yaml", catalog: nil)
        return []
    } catch {
        return error.diagnostics.map(\.description)
    }
}

@Suite("on.schedule")
struct ScheduleTriggerTests {
    @Test func entriesParseWithTheirDefaults() throws {
        let wf = try WorkflowLoader.parse(source: workflow("""
              schedule:
                - { cron: "0 2 * * *", inputs: { source: /media/nightly } }
                - cron: "@hourly"
                  timezone: Europe/Berlin
                  overlap: queue
                  catchup: 6h
                  inputs: { source: relative/dir, note: hello }
            """), file: "w.yaml", catalog: nil)
        let s = wf.triggers.schedules
        #expect(s.count == 2)
        #expect(s[0].cron.text == "0 2 * * *" && s[0].timeZone == nil && s[0].overlap == .skip && s[0].catchup == nil)
        #expect(s[0].inputs == ["source": "/media/nightly"])
        #expect(s[1].cron.text == "@hourly" && s[1].timeZone?.identifier == "Europe/Berlin")
        #expect(s[1].overlap == .queue && s[1].catchup == .seconds(21_600))
        #expect(s[1].inputs == ["source": "relative/dir", "note": "hello"])
        #expect(s[1].location.line == 9)
    }

    @Test func aSingleEntryMayBeAMapping() throws {
        let wf = try WorkflowLoader.parse(source: workflow("  schedule: { cron: \"*/5 * * * *\", inputs: { source: /x } }"),
                                          file: "w.yaml", catalog: nil)
        #expect(wf.triggers.schedules.map(\.cron.text) == ["*/5 * * * *"])
    }

    @Test func mistakesAreReportedAtTheirPlaceAllAtOnce() {
        let found = errors(workflow("""
              schedule:
                - cron: "0 25 * * *"
                  timezone: Europe/Berln
                  overlap: allow
                  catchup: 10
                  inputs: { source: /x, sorce: /y }
                  every: 1h
                - { cron: "0 0 30 2 *", inputs: { source: 5 } }
                - { inputs: { source: /x } }
                - { cron: "* * * * *" }
              watsh: {}
            """))
        #expect(found == [
            "w.yaml:8:16: error: 25 is out of range for the hour field (0-23)",
            "w.yaml:9:17: error: unknown time zone 'Europe/Berln': use an IANA name such as Europe/Berlin or UTC; did you mean 'Europe/Berlin'?",
            "w.yaml:10:16: error: 'overlap' is 'skip' or 'queue', not 'allow'",
            "w.yaml:11:16: error: invalid duration '10' for 'catchup': write a number and a unit, as in 500ms, 30s, 10m, 6h or 1h30m; add a unit, e.g. '10s'",
            "w.yaml:12:29: error: unknown input 'sorce'; did you mean 'source'? (known inputs: source, note)",
            "w.yaml:13:7: error: unknown field 'every' in a schedule",
            "w.yaml:14:15: error: the cron expression '0 0 30 2 *' never fires (no month has that day)",
            "w.yaml:14:47: error: input 'source' must be a path, got an integer",
            "w.yaml:15:7: error: schedule entry is missing required field 'cron' (e.g. cron: \"0 2 * * *\")",
            "w.yaml:16:7: error: schedule entry does not give required input 'source' (add it under 'inputs:')",
            "w.yaml:17:3: error: unknown field 'watsh' in 'on'; did you mean 'watch'?",
        ])
    }

    @Test func scheduleInputsAreValuesNotExpressions() {
        let found = errors(workflow("  schedule: [{ cron: \"@daily\", inputs: { source: \"${{ env.HOME }}\" } }]"))
        #expect(found.count == 1 && found[0].contains("expressions are not evaluated here"), "\(found)")
    }
}
