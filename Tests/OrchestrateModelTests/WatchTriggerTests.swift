// `on.watch` parses into the model with its defaults, and its templates evaluate over `file`.
import OrchestrateJSON
import OrchestrateModel
import Testing

struct WatchTriggerTests {
    @Test func oneRunPerFileWithFiltersAndDefaults() throws {
        let workflow = try WorkflowLoader.parse(source: """
            name: outbox
            inputs:
              source: { type: path, required: true }
              title: { type: string, default: "" }
            on:
              watch:
                path: ../outbox
                recursive: true
                include: ["*.mov", "renders/*.mxf"]
                exclude: "*_proxy.*"
                inputs: { source: "${{ file.path }}", title: "${{ file.name }} (${{ file.size }} bytes)" }
                after: move-to /media/sent
            steps:
              copy:
                uses: exec
                with: { command: [cp, "${{ inputs.source }}", /tmp/out] }
            """, file: "/w/outbox.yaml", catalog: TestCatalog())
        let watch = try #require(workflow.triggers.watch)
        #expect(watch.path == "../outbox")
        #expect(watch.recursive)
        #expect(watch.include == ["*.mov", "renders/*.mxf"])
        #expect(watch.exclude == ["*_proxy.*"])
        #expect(watch.settle == WatchTrigger.defaultSettle)
        #expect(watch.after == .moveTo("/media/sent"))
        guard case .runs(let inputs) = watch.work else {
            Issue.record("expected one run per file")
            return
        }
        let file: JSONValue = ["path": "/w/outbox/a.mov", "name": "a.mov", "relative": "a.mov", "size": 12]
        #expect(try inputs.evaluate(in: EvaluationContext(file: file))
            == ["source": "/w/outbox/a.mov", "title": "a.mov (12 bytes)"])
    }

    @Test func feedingASessionDefaultsTheDestinationToTheRelativePath() throws {
        let workflow = try WorkflowLoader.parse(source: """
            name: feed
            inputs:
              host: { type: string, required: true }
            on:
              watch: { path: /in, settle: 1500ms, feed: accept, inputs: { host: "${{ env.HOST }}" }, after: delete }
            steps:
              accept:
                uses: aspera.session
                with: { host: "${{ inputs.host }}" }
            """, file: "/w/feed.yaml", catalog: TestCatalog())
        let watch = try #require(workflow.triggers.watch)
        #expect(watch.settle == .milliseconds(1500))
        #expect(watch.after == .delete)
        guard case .feed(let step, let inputs, let destination) = watch.work else {
            Issue.record("expected feed")
            return
        }
        #expect(step == "accept")
        #expect(try inputs.evaluate(in: EvaluationContext(env: ["HOST": "h"])) == ["host": "h"])
        #expect(try destination.evaluate(in: EvaluationContext(file: ["relative": "sub/a.bin"])) == "sub/a.bin")
    }

    @Test func aWorkflowWithoutOnHasNoTriggers() throws {
        let workflow = try WorkflowLoader.parse(source: "name: x\nsteps:\n  a: { uses: exec, with: { command: [\"true\"] } }\n",
                                                file: "/w/x.yaml", catalog: TestCatalog())
        #expect(workflow.triggers.isEmpty)
    }
}
