import Foundation
import OrchestrateEngine
import OrchestrateJSON
import OrchestrateModel
import OrchestratePluginHost

/// `orchestrate remote test`: one call of the remote's download step, through the plugin host,
/// for a name that does not exist on the server, into a temporary folder. Nothing is written on
/// the server; "no such file" (for S3: an empty listing under a test prefix) proves the
/// connection, the login and the root (for S3, the bucket and the keys' right to list). The step's inputs come from the same one-step workflow
/// `copy` would run, so the remote is expanded (and its secrets resolved) exactly as in a run.
struct RemoteProbe {
    let remote: Remote
    let registry: PluginRegistry

    struct Outcome {
        var ok: Bool
        var stepType: String
        var detail: String
        var seconds: Double
    }

    /// The answers that mean the server was reached and the name is simply not there.
    static let absentCodes: Set<String> = ["ENOENT", "http_404", "s3_NoSuchKey"]

    func run() throws -> Outcome {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("orchestrate-remote-test-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: false,
                                                attributes: [.posixPermissions: 0o700])
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let probeName = ".orchestrate-remote-test-\(UUID().uuidString.prefix(8).lowercased())"
        if remote.type == .http {
            throw CLIFailure.usage("'\(remote.name)' is an http remote: it names no server to test (its URLs are in the steps)")
        }
        if remote.type == .s3, remote.field("bucket") == nil {
            throw CLIFailure.usage("'\(remote.name)' names no bucket: there is nothing to list; add bucket: to test it")
        }
        let listing = remote.type == .s3  // a prefix download lists the bucket (ListObjectsV2)
        let plan: CopyPlan
        switch CopyPlan.make(source: .server(type: remote.type, remote: remote.name, fields: [:], path: probeName + (listing ? "/" : ""),
                                             written: "\(remote.name):\(probeName)"),
                             destination: .local(folder + "/"), options: .init(recursive: listing),
                             summary: "orchestrate remote test \(remote.name)", registry: registry) {
        case .success(let p): plan = p
        case .failure(let refusal): throw CLIFailure.usage(refusal.message)
        }
        let workflow = try WorkflowLoading.parse(source: plan.workflowText, file: "<remote test>", registry: registry)
        try InputParsing.checkSecrets(workflow)
        let secrets = SecretResolver.resolve(workflow.secrets, environment: ProcessInfo.processInfo.environment).values
        let redactor = Redactor(secrets: secrets.values)
        guard let step = workflow.steps.first, let stepType = registry.stepType(step.uses) else {
            throw CLIFailure.usage("no plugin provides \(plan.stepType)")
        }
        let inputs: JSONValue
        do {
            inputs = try step.with.evaluate(in: EvaluationContext(inputs: plan.inputs, secrets: secrets))
        } catch {
            throw CLIFailure.usage(redactor.redact("\(error)"))
        }
        let delegate = ProbeDelegate()
        let started = ContinuousClock.now
        let request = StepRequest(runID: "remote-test", stepID: "test", inputs: inputs, runDir: folder, timeout: .seconds(120))
        let result = StepInvocation(stepType: stepType, request: request, delegate: delegate).run()
        let elapsed = started.duration(to: .now)
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) * 1e-18
        switch result {
        case .success:
            return Outcome(ok: true, stepType: step.uses, detail: listing ? "listed the bucket: nothing under a test prefix, as expected"
                : "connected; the test name is absent, as expected", seconds: seconds)
        case .failure(let failure):
            if let code = failure.code, Self.absentCodes.contains(code) {
                return Outcome(ok: true, stepType: step.uses,
                               detail: "connected and logged in; the server says \(probeName) does not exist, as expected", seconds: seconds)
            }
            return Outcome(ok: false, stepType: step.uses, detail: redactor.redact(failure.description), seconds: seconds)
        }
    }
}

/// A step call with no journal: progress and checkpoints go nowhere; logs are dropped (the
/// outcome is the step's result).
private final class ProbeDelegate: StepHostDelegate, @unchecked Sendable {
    func log(_ level: LogLevel, _ message: String) {}
    func progress(_ progress: StepProgress) {}
    func saveCheckpoint(_ data: [UInt8]) -> Bool { true }
    func nextItem(timeout: Duration) -> NextItem { .closed }
    func itemDone(id: String, error: String?) {}
    func saveItemCheckpoint(id: String, data: [UInt8]) -> Bool { true }
    func itemProgress(id: String, bytesDone: Int64, bytesTotal: Int64) {}
}
