// Valid workflows parse into the right structure; loader-level behaviour (sorting, files, YAML).
import Foundation
import OrchestrateJSON
import OrchestrateModel
import Testing

/// The example of docs/design.md ("Workflow language v1"), completed with activate and set-metadata
/// steps. Its description is quoted here: unquoted, "Classic upload: create…" is not valid YAML
/// (a plain scalar cannot contain ": ").
let vimeoWorkflow = """
version: 1
name: vimeo-upload
description: "Classic upload: create ticket, export, upload, activate, set metadata."
inputs:                              # typed and validated before anything runs
  source:  { type: path, required: true }
  api:     { type: string, default: "https://api.vimeo.com" }
  title:   { type: string, default: "" }
secrets:                             # never logged, never written to the state store;
  token:   { env: VIMEO_TOKEN }      # resolved again at every attempt (a rotated token is picked up)
defaults:
  timeout: 10m                       # per attempt
  retry: { max_attempts: 5, initial_interval: 1s, backoff: 2.0, max_interval: 1m, jitter: full }
concurrency:                         # keyed limits shared by every run in this state store
  - { key: "api:${{ inputs.api }}", limit: 4 }
steps:
  create:
    uses: http.request
    with:
      method: POST
      url: "${{ inputs.api }}/me/videos"
      headers: { Authorization: "bearer ${{ secrets.token }}" }
      json: { upload: { approach: streaming } }
    idempotency_key: "${{ run.id }}/create"
    compensate:                      # undo when the run is cancelled or fails later (saga)
      uses: http.request
      with: { method: DELETE, url: "${{ inputs.api }}${{ steps.create.outputs.json.uri }}" }
  export:
    needs: [create]
    uses: exec
    with: { command: [cp, "${{ inputs.source }}", "${{ run.dir }}/export.bin"] }
  upload:
    needs: [export]
    uses: http.upload
    with: { url: "${{ steps.create.outputs.json.upload.upload_link }}", file: "${{ run.dir }}/export.bin", protocol: vimeo-streaming }
    timeout: 6h
  activate:
    needs: upload
    uses: http.request
    retry: { max_attempts: 2 }
    with:
      method: PATCH
      url: "${{ inputs.api }}${{ steps.create.outputs.json.uri }}"
      headers: { Authorization: "bearer ${{ secrets.token }}" }
      json: { upload: { status: complete } }
  set_metadata:
    needs: [activate]
    if: inputs.title != ''
    uses: http.request
    continue_on_error: true
    with:
      method: PATCH
      url: "${{ inputs.api }}${{ steps.create.outputs.json.uri }}"
      json: { name: "${{ inputs.title }}" }
outputs:
  video: "${{ steps.create.outputs.json.uri }}"
  size: ${{ steps.upload.outputs.bytes }}
"""

private func parse(_ source: String, catalog: (any StepCatalog)? = TestCatalog()) throws(WorkflowErrors) -> Workflow {
    try WorkflowLoader.parse(source: source, file: "test.yaml", catalog: catalog)
}

private func errors(_ source: String, catalog: (any StepCatalog)? = TestCatalog()) -> [Diagnostic] {
    do {
        _ = try parse(source, catalog: catalog)
        return []
    } catch {
        return error.diagnostics
    }
}

private func at(_ d: [Diagnostic]) -> [String] { d.map { "\($0.location.line):\($0.location.column) \($0.message)" } }

@Suite("Workflow parsing")
struct WorkflowParsingTests {
    @Test("the docs/design.md vimeo example parses with the right structure")
    func vimeo() throws {
        let wf = try parse(vimeoWorkflow)
        #expect(wf.file == "test.yaml")
        #expect(wf.source == vimeoWorkflow)
        #expect(wf.name == "vimeo-upload")
        #expect(wf.description == "Classic upload: create ticket, export, upload, activate, set metadata.")
        #expect(wf.inputs.map(\.name) == ["source", "api", "title"])
        #expect(wf.inputs.map(\.type) == [.path, .string, .string])
        #expect(wf.inputs.map(\.required) == [true, false, false])
        #expect(wf.inputs[1].defaultValue == "https://api.vimeo.com")
        #expect(wf.secrets.map(\.name) == ["token"])
        #expect(wf.secrets[0].env == "VIMEO_TOKEN")
        #expect(wf.secrets[0].location.line == 9)

        #expect(wf.defaults.timeout == .seconds(600))
        #expect(wf.defaults.retry == RetryPolicy(maxAttempts: 5, initialInterval: .seconds(1), backoff: 2,
                                                 maxInterval: .seconds(60), jitter: .full))
        #expect(wf.concurrency.count == 1)
        #expect(wf.concurrency[0].limit == 4)

        #expect(wf.steps.map(\.id) == ["create", "export", "upload", "activate", "set_metadata"])
        #expect(wf.steps.map(\.needs) == [[], ["create"], ["export"], ["upload"], ["activate"]])
        #expect(wf.steps.map(\.uses) == ["http.request", "exec", "http.upload", "http.request", "http.request"])
        #expect(wf.steps.map(\.timeout) == [.seconds(600), .seconds(600), .seconds(21_600), .seconds(600), .seconds(600)])
        #expect(wf.steps.map(\.continueOnError) == [false, false, false, false, true])

        let create = try #require(wf.step("create"))
        #expect(create.location.line == 16 && create.location.column == 3)
        #expect(create.usesLocation.line == 17 && create.usesLocation.column == 11)
        #expect(create.retry == wf.defaults.retry)
        #expect(create.forEach == nil && create.maxParallel == nil && create.condition == nil)
        #expect(create.compensate?.uses == "http.request")
        #expect(create.compensate?.with.referencedSteps == ["create"])
        #expect(create.compensate?.timeout == .seconds(600))
        #expect(create.compensate?.retry == wf.defaults.retry)

        // A step's retry is merged over the defaults field by field.
        let activate = try #require(wf.step("activate"))
        #expect(activate.retry.maxAttempts == 2)
        #expect(activate.retry.initialInterval == .seconds(1))
        #expect(activate.retry.maxInterval == .seconds(60))
        #expect(activate.retry.jitter == .full)

        #expect(wf.step("nope") == nil)
        #expect(wf.outputs.map(\.name) == ["video", "size"])
        #expect(wf.stepsInDependencyOrder.map(\.id) == ["create", "export", "upload", "activate", "set_metadata"])
        #expect(wf.dependents(of: "create") == ["export"])
    }

    @Test("the vimeo example's templates evaluate against a run")
    func vimeoEvaluation() throws {
        let wf = try parse(vimeoWorkflow)
        let inputs = try wf.resolveInputs(strings: ["source": "clip.mov"], json: [:], currentDirectory: "/work")
        var ctx = EvaluationContext(inputs: inputs, secrets: ["token": "s3cret"],
                                    run: ["id": "R1", "dir": "/runs/R1", "attempt": 1])
        let create = try #require(wf.step("create"))
        #expect(try create.with.evaluate(in: ctx) == [
            "method": "POST", "url": "https://api.vimeo.com/me/videos",
            "headers": ["Authorization": "bearer s3cret"], "json": ["upload": ["approach": "streaming"]],
        ])
        #expect(try create.idempotencyKey?.evaluate(in: ctx) == "R1/create")
        #expect(try wf.concurrency[0].key.evaluate(in: ctx) == "api:https://api.vimeo.com")
        #expect(try wf.step("export")?.with.evaluate(in: ctx) == ["command": ["cp", "/work/clip.mov", "/runs/R1/export.bin"]])

        ctx.steps["create"] = ["status": "succeeded",
                               "outputs": ["json": ["uri": "/videos/9", "upload": ["upload_link": "https://up/9"]]]]
        ctx.steps["upload"] = ["status": "succeeded", "outputs": ["bytes": 123_456]]
        #expect(try wf.step("upload")?.with.evaluate(in: ctx)["url"] == "https://up/9")
        #expect(try create.compensate?.with.evaluate(in: ctx)["url"] == "https://api.vimeo.com/videos/9")
        let outputs = try wf.outputs.map { ($0.name, try $0.value.evaluate(in: ctx)) }
        #expect(outputs.map(\.0) == ["video", "size"])
        #expect(outputs[0].1 == "/videos/9")
        #expect(outputs[1].1 == .int(123_456))  // a whole-string expression keeps its type

        let condition = try #require(wf.step("set_metadata")?.condition)
        #expect(try condition.evaluate(in: ctx) == false)  // title defaults to ""
        ctx.inputs = try wf.resolveInputs(strings: ["source": "a", "title": "Hi"], json: [:], currentDirectory: "/")
        #expect(try condition.evaluate(in: ctx) == true)
    }

    @Test("without a catalog, step types and schemas are not checked, but everything else is")
    func noCatalog() {
        let source = """
        name: x
        steps:
          a: { uses: no.such.type, with: { anything: [1, 2] } }
          b: { uses: exec, needs: [zz] }
        """
        #expect(at(errors(source, catalog: nil)) == ["4:28 step 'b' needs unknown step 'zz'"])
        #expect(errors(source).count == 3)  // + unknown type, + missing 'command' for exec
    }

    @Test("for_each, item, max_parallel, single-mapping concurrency, needs as a string, bare and wrapped if")
    func fanOut() throws {
        let wf = try parse("""
        name: fan
        inputs:
          files: { type: array, default: [a.bin, b.bin] }
        steps:
          list:
            uses: exec
            with: { command: [ls] }
          copy:
            needs: list
            uses: fs.copy
            for_each: ${{ inputs.files }}
            max_parallel: 3
            if: ${{ steps.list.status == 'succeeded' }}
            concurrency: { key: "disk:${{ item }}", limit: 1 }
            idempotency_key: "copy-${{ item }}"
            with: { source: "/in/${{ item }}", destination: "/out/${{ basename(item) }}", overwrite: true }
          literal:
            uses: fs.copy
            for_each: [x, y]
            if: length(inputs.files) > 1
            with: { source: "${{ item }}", destination: /tmp }
        """)
        let copy = try #require(wf.step("copy"))
        #expect(copy.needs == ["list"])
        #expect(copy.maxParallel == 3)
        #expect(copy.concurrency.count == 1 && copy.concurrency[0].limit == 1)
        var ctx = EvaluationContext(inputs: ["files": ["a.bin", "b.bin"]], steps: ["list": ["status": "succeeded"]])
        #expect(try copy.forEach?.evaluate(in: ctx) == ["a.bin", "b.bin"])
        #expect(try copy.condition?.evaluate(in: ctx) == true)
        ctx.item = "a.bin"
        #expect(try copy.with.evaluate(in: ctx) == ["source": "/in/a.bin", "destination": "/out/a.bin", "overwrite": true])
        #expect(try copy.concurrency[0].key.evaluate(in: ctx) == "disk:a.bin")
        #expect(try copy.idempotencyKey?.evaluate(in: ctx) == "copy-a.bin")
        let literal = try #require(wf.step("literal"))
        #expect(literal.forEach?.isLiteral == true)
        #expect(try literal.forEach?.evaluate(in: ctx) == ["x", "y"])
        #expect(try literal.condition?.evaluate(in: ctx) == true)
        #expect(literal.condition?.source == "length(inputs.files) > 1")
    }

    @Test("YAML 1.2 scalars: yes/no/on stay strings; numbers and nulls are typed")
    func scalars() throws {
        let wf = try parse("""
        name: scalars
        steps:
          a:
            uses: aspera.session
            with: { host: h, flag: yes, other: on, n: 12, f: 1.5, hex: 0x1F, none: ~, quoted: "12", t: true }
        """)
        #expect(try wf.steps[0].with.evaluate(in: EvaluationContext()) == [
            "host": "h", "flag": "yes", "other": "on", "n": 12, "f": 1.5, "hex": 31, "none": nil, "quoted": "12", "t": true,
        ])
    }

    @Test("no defaults: the built-in retry policy and no timeout")
    func builtInDefaults() throws {
        let wf = try parse("name: d\nsteps:\n  a: { uses: exec, with: { command: [x] }, retry: { jitter: none } }\n")
        #expect(wf.defaults.timeout == nil)
        #expect(wf.defaults.retry == .default)
        #expect(wf.steps[0].timeout == nil)
        var expected = RetryPolicy.default
        expected.jitter = .none
        #expect(wf.steps[0].retry == expected)
    }

    @Test("hold_timeout: the step's own, else defaults', else an hour; compensations take the defaults'")
    func holdTimeout() throws {
        let none = try parse("name: h\nsteps:\n  a: { uses: exec, with: { command: [x] } }\n")
        #expect(none.steps[0].holdTimeout == .seconds(3600) && Step.defaultHoldTimeout == .seconds(3600))
        let wf = try parse("""
        name: h
        defaults: { hold_timeout: 20m }
        steps:
          a: { uses: exec, with: { command: [x] }, compensate: { uses: exec, with: { command: [y] } } }
          b: { uses: exec, with: { command: [x] }, hold_timeout: 90s }
        """)
        #expect(wf.steps.map(\.holdTimeout) == [.seconds(1200), .seconds(90)])
        #expect(wf.steps[0].compensate?.holdTimeout == .seconds(1200))
    }

    @Test("a bad hold_timeout is an error at its value; a misspelt one suggests hold_timeout")
    func badHoldTimeout() {
        let source = """
        name: h
        defaults: { hold_timeout: 0s }
        steps:
          a: { uses: exec, with: { command: [x] }, hold_timeout: soon }
          b: { uses: exec, with: { command: [x] }, hold_timout: 5m }
        """
        #expect(at(errors(source)) == [
            "2:27 'hold_timeout' must be longer than zero",
            "4:58 invalid duration 'soon' for 'hold_timeout': write a number and a unit, as in 500ms, 30s, 10m, 6h or 1h30m",
            "5:44 unknown field 'hold_timout' in step 'b'; did you mean 'hold_timeout'?",
        ])
        let typoInDefaults = "name: h\ndefaults: { hold_timout: 5m }\nsteps:\n  a: { uses: exec, with: { command: [x] } }\n"
        #expect(errors(typoInDefaults).first?.message.contains("did you mean 'hold_timeout'?") == true,
                "\(errors(typoInDefaults).map(\.message))")
    }

    @Test("compensate may read any step, its own included; outputs may read any step")
    func compensateScope() {
        let ok = """
        name: c
        steps:
          a:
            uses: http.request
            with: { url: "https://x" }
            compensate:
              uses: http.request
              with: { url: "https://x${{ steps.a.outputs.json.uri }}${{ steps.b.outputs.x }}" }
          b: { uses: exec, with: { command: [x] } }
        outputs:
          both: "${{ steps.a.status }} ${{ steps.b.status }}"
        """
        #expect(errors(ok).isEmpty)
        let ownOutputs = """
        name: c
        steps:
          a: { uses: http.request, with: { url: "${{ steps.a.outputs.x }}" } }
        """
        #expect(at(errors(ownOutputs)) == ["3:46 step 'a' cannot read its own steps.a (only its 'compensate' can)"])
    }

    @Test("transitive needs count as a dependency")
    func transitiveNeeds() {
        let source = """
        name: t
        steps:
          a: { uses: exec, with: { command: [x] } }
          b: { uses: exec, needs: a, with: { command: [x] } }
          c: { uses: exec, needs: b, with: { command: ["${{ steps.a.outputs.x }}"] } }
        """
        #expect(errors(source).isEmpty)
    }

    @Test("diagnostics come sorted by position even when found out of order")
    func sorted() {
        let source = """
        name: s
        steps:
          a: { uses: exec, with: { command: ["${{ steps.b.outputs.x }}"] } }
          b: { uses: exec, with: { command: [x] }, timeout: forever }
        """
        let d = errors(source)
        #expect(at(d) == [
            "3:43 step 'a' uses steps.b but does not depend on it; add it to needs",
            "4:53 invalid duration 'forever' for 'timeout': write a number and a unit, as in 500ms, 30s, 10m, 6h or 1h30m",
        ])
        let description = WorkflowErrors(diagnostics: d.reversed()).description
        #expect(description == """
        test.yaml:3:43: error: step 'a' uses steps.b but does not depend on it; add it to needs
        test.yaml:4:53: error: invalid duration 'forever' for 'timeout': write a number and a unit, as in 500ms, 30s, 10m, 6h or 1h30m
        """)
    }

    @Test("duplicate keys: repeated, quoted, and in several mappings are all reported")
    func duplicates() {
        let source = """
        name: d
        steps:
          a:
            uses: exec
            with: { command: [x], "cwd": /a, 'cwd': /b }
            uses: exec
            uses: exec
          b: { uses: exec, with: { command: [x] } }
          b: { uses: exec, with: { command: [y] } }
        """
        #expect(at(errors(source)) == [
            "5:38 duplicate key 'cwd' (first defined at 5:27)",
            "6:5 duplicate key 'uses' (first defined at 4:5)",
            "7:5 duplicate key 'uses' (first defined at 4:5)",
            "9:3 duplicate step id 'b' (first defined at 8:3)",
        ])
    }

    @Test("a syntax error after an earlier duplicate still reports the syntax error")
    func syntaxAfterDuplicate() {
        let d = errors("name: a\nname: b\nsteps: [\n")
        #expect(d.count == 1)
        #expect(d.first?.message.hasPrefix("invalid YAML") == true)
    }

    @Test("an unreadable file is one diagnostic at 1:1")
    func unreadable() {
        do {
            _ = try WorkflowLoader.load(path: "/nonexistent/dir/w.yaml", catalog: nil)
            Issue.record("expected an error")
        } catch {
            #expect(error.diagnostics.count == 1)
            #expect(error.diagnostics[0].location == SourceLocation(file: "/nonexistent/dir/w.yaml", line: 1, column: 1))
            #expect(error.description.hasPrefix("/nonexistent/dir/w.yaml:1:1: error: cannot read the workflow file"))
        }
    }

    @Test("load reads the file and keeps its source")
    func loadsFromDisk() throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("orchestrate-model-\(UInt64.random(in: 0...UInt64.max)).yaml").path
        try vimeoWorkflow.write(toFile: path, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: path) }
        let wf = try WorkflowLoader.load(path: path, catalog: TestCatalog())
        #expect(wf.file == path)
        #expect(wf.source == vimeoWorkflow)
        #expect(wf.steps.count == 5)
    }

    @Test("the docs/design.md description line, unquoted, is a YAML error")
    func designDescriptionNeedsQuotes() {
        let d = errors("name: x\ndescription: Classic upload: create ticket\nsteps:\n  a: { uses: exec, with: { command: [x] } }\n")
        #expect(d.count == 1)
        #expect(d.first?.location.line == 2)
        #expect(d.first?.message.contains("mapping values are not allowed") == true)
    }

    @Test("secrets: not in stored keys nor exec's argv; env checked; names checked")
    func secretRules() {
        let argv = "secrets cannot be used in exec's 'command': a command line is visible to every user of the machine (ps); pass the secret in 'env' or 'stdin'"
        let source = """
        name: s
        secrets:
          token: { env: TOKEN }
          bad: { env: "1X" }
        steps:
          a:
            uses: exec
            idempotency_key: "${{ secrets.token }}"
            with: { command: ["${{ secrets.token }}", "${{ json(secrets) }}"] }
        """
        #expect(at(errors(source)) == [
            "4:15 invalid environment variable name '1X'",
            "8:27 secrets cannot be used in 'idempotency_key': keys are stored in the state store",
            "9:28 \(argv)",
            "9:57 read secrets one at a time, as secrets.<name>",
            "9:57 \(argv)",
        ])
    }

    @Test("workflow concurrency keys cannot read steps or item")
    func workflowKeys() {
        let source = """
        name: k
        concurrency:
          - { key: "${{ steps.a.outputs.host }}", limit: 2 }
          - { key: "${{ item }}", limit: 2 }
        steps:
          a: { uses: exec, with: { command: [x] } }
        """
        #expect(at(errors(source)) == [
            "3:17 workflow concurrency keys cannot read steps: they apply to every step, before any has run",
            "4:17 'item' is only available in a for_each step",
        ])
    }
}
