// The entry point: workflow text in, validated `Workflow` (or every error at once) out.
import Foundation
import OrchestrateJSON

/// Loads and validates workflow files.
///
///     do {
///         let wf = try WorkflowLoader.load(path: "upload.yaml", catalog: registry)
///     } catch {
///         FileHandle.standardError.write(Data((error.description + "\n").utf8))   // exit 2
///     }
///
/// With a `catalog`, unknown step types and `with:` values that break a type's input schema are
/// errors too; with nil those two checks are skipped (everything else is still checked).
public enum WorkflowLoader {
    /// Reads the file at `path` and parses it. An unreadable file is one diagnostic at 1:1.
    public static func load(path: String, catalog: (any StepCatalog)?,
                            remotes: (any RemoteDefinitions)? = nil) throws(WorkflowErrors) -> Workflow {
        let text: String
        do {
            let data = try Data(contentsOf: URL(fileURLWithPath: path))
            guard let decoded = String(data: data, encoding: .utf8) else {
                throw WorkflowErrors(diagnostics: [Diagnostic(location: SourceLocation(file: path, line: 1, column: 1),
                                                              message: "the workflow file is not valid UTF-8 text")])
            }
            text = decoded
        } catch let error as WorkflowErrors {
            throw error
        } catch {
            let reason = (error as NSError).localizedFailureReason ?? (error as NSError).localizedDescription
            throw WorkflowErrors(diagnostics: [Diagnostic(location: SourceLocation(file: path, line: 1, column: 1),
                                                          message: "cannot read the workflow file: \(reason)")])
        }
        return try parse(source: text, file: path, catalog: catalog, remotes: remotes)
    }

    /// Parses and validates workflow text; `file` is only used in locations. `remotes` are the
    /// user's (the remotes file), read only if a step names a remote the workflow does not define;
    /// nil: only the workflow's own `remotes:`.
    public static func parse(source: String, file: String, catalog: (any StepCatalog)?,
                             remotes: (any RemoteDefinitions)? = nil) throws(WorkflowErrors) -> Workflow {
        let text = SourceText(file: file, text: source)
        let root: YAMLNode?
        switch YAMLReader.read(source, source: text) {
        case .failure(let d): throw WorkflowErrors(diagnostics: [d])
        case .success(let node): root = node
        }
        var decoder = WorkflowDecoder(source: text, remotes: remotes, catalog: catalog)
        let decoded = decoder.decode(root)
        var validator = WorkflowValidator(workflow: decoded, catalog: catalog, source: text)
        validator.validate()
        let diagnostics = decoder.diagnostics + validator.bag.diagnostics
        guard diagnostics.isEmpty else { throw WorkflowErrors(diagnostics: diagnostics) }
        var workflow = Workflow(file: file, source: source, name: decoded.name, description: decoded.description,
                                inputs: decoded.inputs, secrets: decoded.secrets, defaults: decoded.defaults,
                                concurrency: decoded.concurrency, steps: decoded.steps, outputs: decoded.outputs,
                                onFinish: decoded.onFinish.map(\.hook), triggers: decoded.triggers)
        workflow.retention = decoded.retention
        return workflow
    }
}
