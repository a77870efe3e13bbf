import Foundation
import OrchestrateEngine
import OrchestrateJSON
import OrchestrateModel
import OrchestrateOperations
import OrchestrateStore
import OrchestrateTokenBucket

/// `POST /api/runs`: the JSON body of a submission, read and checked, then handed to the
/// submission use case (`RunSubmission`, shared with `orchestrate submit`).
///
/// ```json
/// {"workflow_path": "/srv/flows/upload.yaml", "inputs": {"source": "/data/a.mov"},
///  "labels": {"batch": "7"}, "queue": "uploads", "priority": 5}
/// ```
/// or `"workflow_yaml": "name: …"` (with an optional `"file_name"` for its diagnostics) instead
/// of `workflow_path`. A server with `--api-workflows DIR` takes only `"workflow": "NAME"` (a
/// workflow of DIR, `APIWorkflows`) and refuses the other two with 403. A workflow or inputs that do not validate are a 422 whose `errors` list
/// the problems, each workflow error with its FILE:LINE:COL.
struct SubmissionRequest: Sendable {
    enum Source: Sendable { case path(String), yaml(String, file: String), named(String) }

    var source: Source
    var inputs: [String: JSONValue]
    var labels: [String: String]
    var queue: String
    var priority: Int
    var id: String?
    var maxRate: RateTimetable?

    init(_ body: [String: JSONValue], workflows: APIWorkflows?) throws {
        let known: Set<String> = ["workflow", "workflow_path", "workflow_yaml", "file_name", "inputs", "labels", "queue", "priority", "id", "max_rate"]
        if let unknown = body.keys.sorted().first(where: { !known.contains($0) }) {
            throw Problem(.badRequest, "unknown member '\(unknown)'; known: \(known.sorted().joined(separator: ", "))")
        }
        source = try Self.source(body, restricted: workflows != nil)
        inputs = try body.object("inputs") ?? [:]
        labels = try (body.object("labels") ?? [:]).mapValues {
            guard let text = $0.stringValue else { throw Problem(.badRequest, "label values must be strings") }
            return text
        }
        queue = try body.string("queue") ?? "default"
        guard QueueName.isValid(queue) else { throw Problem(.badRequest, "queue '\(queue)': \(QueueName.rule)") }
        priority = Int(try body.int("priority") ?? 0)
        id = try body.string("id")
        if let id, !RunID.isValid(id) { throw Problem(.badRequest, "id: \(RunID.Invalid(id: id, stored: false))") }
        maxRate = try Self.maxRate(body["max_rate"])
    }

    /// Which workflow: `workflow` (a name) on a server with `--api-workflows`, else
    /// `workflow_path` or `workflow_yaml`.
    private static func source(_ body: [String: JSONValue], restricted: Bool) throws -> Source {
        if restricted {
            guard !body.has("workflow_path") && !body.has("workflow_yaml") else {
                throw Problem(.forbidden, "this server starts only the workflows of its --api-workflows directory: "
                              + "give \"workflow\": NAME, not workflow_path or workflow_yaml")
            }
            guard let name = try body.string("workflow") else {
                throw Problem(.badRequest, "give \"workflow\": NAME, a workflow of the server's --api-workflows directory")
            }
            return .named(name)
        }
        // 403 as its mirror image above: a request the document describes, that this server's
        // configuration does not take.
        guard !body.has("workflow") else {
            throw Problem(.forbidden, "\"workflow\": NAME needs a server started with --api-workflows DIR; give workflow_path or workflow_yaml")
        }
        switch (try body.string("workflow_path"), try body.string("workflow_yaml")) {
        case (let path?, nil):
            guard path.hasPrefix("/") else { throw Problem(.badRequest, "workflow_path must be an absolute path on the server") }
            return .path(path)
        case (nil, let yaml?): return .yaml(yaml, file: try body.string("file_name") ?? "submitted.yaml")
        default: throw Problem(.badRequest, "give exactly one of workflow_path and workflow_yaml")
        }
    }

    /// `max_rate`: bytes per second, or a text as `--max-rate` takes (`10M`, a timetable).
    private static func maxRate(_ value: JSONValue?) throws -> RateTimetable? {
        guard let value, value != .null else { return nil }
        if let bytes = value.intValue {
            guard bytes > 0 else { throw Problem(.badRequest, "max_rate must be a positive number of bytes per second") }
            return RateTimetable(bytesPerSecond: bytes)
        }
        guard let text = value.stringValue else { throw Problem(.badRequest, "max_rate must be bytes per second or a text such as \"10M\"") }
        do { return try RateTimetable.parse(text) } catch { throw Problem(error.isConflict ? .unprocessableContent : .badRequest, "max_rate: \(error)") }
    }

    /// Validates and queues the run; returns its detail. Runs on the blocking pool.
    func submit(_ services: APIServices) throws -> JSONValue {
        let catalog = RegistryStepCatalog(registry: services.registry)
        // A name is resolved here, on the blocking pool: it reads the file system.
        var file: String?
        switch source {
        case .path(let path): file = path
        case .named(let name):
            guard let workflows = services.workflows else { throw Problem(.badRequest, "this server takes no workflow names") }
            file = try workflows.resolve(name)
        case .yaml: file = nil
        }
        let workflow: Workflow
        do {
            switch source {
            case .path, .named: workflow = try WorkflowLoader.load(path: file!, catalog: catalog, remotes: RemotesFile())
            case .yaml(let yaml, let file): workflow = try WorkflowLoader.parse(source: yaml, file: file, catalog: catalog,
                                                                                 remotes: RemotesFile())
            }
        } catch {
            let errors: [JSONValue] = error.diagnostics.map {
                ["file": .string($0.location.file), "line": .int(Int64($0.location.line)), "column": .int(Int64($0.location.column)),
                 "message": .string($0.message), "text": .string($0.description)]
            }
            throw Problem(.unprocessableContent, "the workflow has \(errors.count) error(s)", extra: ["errors": .array(errors)])
        }
        let resolved: JSONValue
        do {
            // Relative input paths mean nothing to a remote client: they resolve against the
            // workflow file's directory (or the state directory, for YAML sent in the body).
            let base: String
            if let file { base = (file as NSString).deletingLastPathComponent } else { base = services.stateDirectory }
            resolved = try workflow.resolveInputs(strings: [:], json: inputs, currentDirectory: base)
        } catch {
            throw Problem(.unprocessableContent, "the inputs do not match the workflow",
                          extra: ["errors": .array(error.messages.map { ["message": .string($0), "text": .string("\(workflow.file): \($0)")] })])
        }
        var submission = RunSubmission(store: services.store)
        submission.labels = labels
        submission.priority = priority
        submission.queue = queue
        submission.maxRate = maxRate
        let run: RunRecord
        if let id {
            guard case .queued(let queued, _) = try submission.submit(workflow, inputs: resolved, id: id, existing: .refuse) else {
                throw Problem(.conflict, "a run named \(id) already exists")
            }
            run = queued
        } else {
            run = try submission.submit(workflow, inputs: [resolved])[0]
        }
        // The record as created if someone deleted the run already.
        return try RunDocument.detail(ofRun: run.id, store: services.store)
            ?? RunDocument.detail(RunDetailRecord(run: run, steps: [], items: [], progress: []))
    }
}
