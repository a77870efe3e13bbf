import Foundation
import OrchestrateExactPath
import OrchestrateJSON
import OrchestrateModel
import OrchestratePluginHost

/// The one-step workflow `orchestrate copy` runs: which step type moves SRC to DST, and its
/// inputs. Every value the user typed is a run input read by `${{ inputs.NAME }}`, never text
/// pasted into the workflow, so a path holding `${{` stays a path; the same command gives the
/// same workflow text and inputs, so running it again after an interrupt continues the run.
struct CopyPlan {
    /// E.g. `s3.upload`.
    let stepType: String
    /// The remote the step names, if any (its fields are merged by the workflow loader).
    let remote: String?
    /// The step's inputs, in a stable order.
    let values: [(name: String, value: JSONValue)]
    /// How the command was written, for the workflow's description.
    let summary: String

    struct Refusal: Error { let message: String }

    struct Options {
        var recursive = false
        var ifExists: String?
        /// Read a local DST that is an existing folder (not ending in "/") as if it were not
        /// there yet: the plan an interrupted copy into it was made with, before it made it.
        var destinationAsNew = false
    }

    /// The workflow text (inputs declared by type, every `with:` value an input).
    var workflowText: String {
        var lines = ["version: 1", "name: copy", "description: \(Self.yamlScalar(summary))", "inputs:"]
        for (name, value) in values {
            let type: String
            switch value {
            case .int: type = "integer"
            case .bool: type = "boolean"
            default: type = "string"
            }
            lines.append("  \(name): { type: \(type), required: true }")
        }
        lines += ["steps:", "  copy:", "    uses: \(stepType)",
                  "    retry: { max_attempts: 5, initial_interval: 2s, backoff: 2.0, max_interval: 1m }", "    with:"]
        if let remote { lines.append("      remote: \(remote)") }
        for (name, _) in values { lines.append("      \(name): \"${{ inputs.\(name) }}\"") }
        return lines.joined(separator: "\n") + "\n"
    }

    /// `text` as a double-quoted scalar YAML reads back as `text`: JSON's escapes, and `\u` for
    /// the characters YAML refuses even quoted (DEL, C1 controls, U+FFFE, U+FFFF) that JSON leaves
    /// as they are. A file name may hold any of them.
    static func yamlScalar(_ text: String) -> String {
        var out = ""
        for scalar in JSONValue.string(text).jsonText.unicodeScalars {
            switch scalar.value {
            case 0x7F ... 0x9F, 0xFFFE, 0xFFFF:
                let hex = String(scalar.value, radix: 16)
                out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default:
                out.unicodeScalars.append(scalar)
            }
        }
        return out
    }

    var inputs: JSONValue { .object(Dictionary(values.map { ($0.name, $0.value) }, uniquingKeysWith: { a, _ in a })) }

    static func make(source: CopyEndpoint, destination: CopyEndpoint, options: Options, summary: String,
                     registry: PluginRegistry) -> Result<CopyPlan, Refusal>
    {
        let builder = Builder(options: options, registry: registry, summary: summary)
        return Result { () throws(Refusal) in try builder.plan(source, destination) }
    }

    private struct Builder {
        let options: Options
        let registry: PluginRegistry
        let summary: String

        func plan(_ source: CopyEndpoint, _ destination: CopyEndpoint) throws(Refusal) -> CopyPlan {
            switch (source, destination) {
            case (.local(let from), .server(let type, let remote, let fields, let path, _)):
                let folder = try localSource(from)
                return try upload(type: type, remote: remote, fields: fields, from: from, folder: folder, to: path)
            case (.server(let type, let remote, let fields, let path, _), .local(let to)):
                return try download(type: type, remote: remote, fields: fields, from: path, to: to)
            case (.web(let url), .local(let to)):
                if options.recursive { throw Refusal(message: "--recursive: an http(s) URL is one file") }
                // The URL names the file only when DST is a folder to put it in.
                let destination = namesAFolder(to)
                    ? localTarget(to, name: try lastComponent(of: URLComponents(string: url)?.path ?? "", what: "the URL \(url)"))
                    : to
                return try make("http.download", remote: nil, ["url": .string(url), "destination": .string(destination)])
            case (_, .web):
                throw Refusal(message: "copy sends nothing to http(s) URLs (downloads only); upload with a workflow's http.upload step")
            case (.local, .local):
                throw Refusal(message: "both sides are local: use cp (or a workflow's fs.copy step)")
            case (.server(_, _, _, _, let a), .server(_, _, _, _, let b)), (.web(let a), .server(_, _, _, _, let b)):
                throw Refusal(message: "copy moves data between this machine and one server; \(a) → \(b) has a server on both sides. "
                    + "Copy to a local folder first, then from it (two copies), or write a workflow with a download step and an upload step")
            }
        }

        /// Whether a local source is a folder; a folder needs --recursive.
        func localSource(_ path: String) throws(Refusal) -> Bool {
            var isFolder: ObjCBool = false
            guard FileManager.default.fileExists(atPath: path, isDirectory: &isFolder) else {
                throw Refusal(message: "\(path) does not exist")
            }
            if isFolder.boolValue && !options.recursive {
                throw Refusal(message: "\(path) is a folder: add --recursive to copy it with what it holds")
            }
            return isFolder.boolValue
        }

        func upload(type: RemoteType, remote: String?, fields: [String: JSONValue], from: String, folder: Bool,
                    to path: String) throws(Refusal) -> CopyPlan
        {
            let name = PathBytes.lastComponent(from)
            // DST ending in "/" (or a remote's bare root) is the folder to copy into, as cp does;
            // a SRC of "." or ".." has no name of its own to add: what it holds goes there.
            let named = !(name.isEmpty || name == "." || name == "..")
            let target = named && (path.isEmpty || path.hasSuffix("/")) ? path + name : path
            var values = fields
            switch type {
            case .s3:
                // A folder goes under a prefix ("" or ending in "/"), a file to a key.
                values["source"] = .string(from)
                if folder {
                    values["prefix"] = .string(target.isEmpty || target.hasSuffix("/") ? target : target + "/")
                } else {
                    values["key"] = .string(target)
                }
                return try make("s3.upload", remote: remote, values)
            case .sftp, .ftp:
                values["source"] = .string(from)
                values["destination"] = .string(target.isEmpty ? "." : target)
                return try make("\(type.rawValue).upload", remote: remote, values)
            case .http:
                throw Refusal(message: "copy does not upload to http remotes")
            }
        }

        func download(type: RemoteType, remote: String?, fields: [String: JSONValue], from path: String,
                      to local: String) throws(Refusal) -> CopyPlan
        {
            var values = fields
            switch type {
            case .s3:
                let stepType = "s3.download"
                if options.recursive {
                    // As a folder's: PREFIX/NAME goes into DST as NAME when DST is a folder, and
                    // PREFIX/. (or the bucket's root) adds no name; "." is no key component.
                    let components = PathBytes.components(path, omittingEmpty: true)
                    let kept = components.filter { $0 != "." }
                    values["prefix"] = .string(kept.isEmpty ? "" : kept.joined(separator: "/") + "/")
                    let named = components.last.map { $0 != "." && $0 != ".." } ?? false
                    values["destination"] = .string(named ? localTarget(local, name: components.last!) : local)
                } else {
                    let name = try lastComponent(of: path, what: "the key '\(path)'")
                    values["key"] = .string(path)
                    values["destination"] = .string(localTarget(local, name: name))
                }
                return try make(stepType, remote: remote, values)
            case .sftp, .ftp:
                let source = path.isEmpty ? "." : path
                values["source"] = .string(source)
                if !options.recursive { values["recursive"] = .bool(false) }
                let name = PathBytes.lastComponent(source)
                if name.contains("\0") { throw Refusal(message: "the remote path '\(path)' holds a NUL byte") }
                let named = !(name.isEmpty || name == "." || name == "..")
                values["destination"] = .string(named ? localTarget(local, name: name) : local)
                return try make("\(type.rawValue).download", remote: remote, values)
            case .http:
                throw Refusal(message: "copy does not download from http remotes: give the URL")
            }
        }

        /// Whether a local DST is a folder to put SRC in: it ends in "/" or is an existing folder
        /// (unless `options.destinationAsNew`: how it was read before an interrupted copy made it).
        func namesAFolder(_ path: String) -> Bool {
            if path.hasSuffix("/") { return true }
            if options.destinationAsNew { return false }
            var isFolder: ObjCBool = false
            return FileManager.default.fileExists(atPath: path, isDirectory: &isFolder) && isFolder.boolValue
        }

        /// A local destination: `name` in it when it names a folder, else the path itself.
        func localTarget(_ path: String, name: String) -> String {
            namesAFolder(path) ? (path.hasSuffix("/") ? path : path + "/") + name : path
        }

        /// The last path component a local name can be made of (never `.`, `..` or empty).
        func lastComponent(of path: String, what: String) throws(Refusal) -> String {
            let name = PathBytes.lastComponent(path)
            guard !name.isEmpty, name != ".", name != "..", !name.contains("\0") else {
                throw Refusal(message: "\(what) names no file: give the local destination's file name")
            }
            return name
        }

        func inputNames(_ stepType: String) -> Set<String> {
            Set(registry.stepType(stepType)?.inputSchema["properties"]?.objectValue?.keys.map { $0 } ?? [])
        }

        func make(_ stepType: String, remote: String?, _ fields: [String: JSONValue]) throws(Refusal) -> CopyPlan {
            guard registry.stepType(stepType) != nil else {
                throw Refusal(message: "no plugin provides \(stepType) (orchestrate plugins list shows what is loaded)")
            }
            var values = fields
            if let ifExists = options.ifExists {
                guard inputNames(stepType).contains("if_exists") else {
                    throw Refusal(message: "--if-exists: \(stepType) has no if_exists input (it always replaces an existing file)")
                }
                values["if_exists"] = .string(ifExists)
            }
            return CopyPlan(stepType: stepType, remote: remote,
                            values: values.sorted { $0.key < $1.key }.map { (name: $0.key, value: $0.value) }, summary: summary)
        }
    }
}
