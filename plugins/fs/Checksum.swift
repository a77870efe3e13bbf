import OrchestratePluginFiles
import OrchestratePluginKit

/// `fs.checksum`: SHA-256 and size of a file.
struct Checksum: StepDefinition {
    static let id = "fs.checksum"
    static let version = "1.0.0"
    static let summary = "SHA-256 and size of a file."
    struct Inputs: StepInputs {
        @Input(help: "file to hash", minLength: 1) var path: String
    }
    static let inputSchema = Inputs.schemaText
    struct Outputs: StepOutputs {
        @Output(help: "SHA-256 (hex)", pattern: LocalFile.sha256Pattern) var sha256: String
        @Output(help: "bytes", minimum: 0) var size: Int64
    }
    static let outputSchema = Outputs.schemaText

    static func run(_ step: StepContext) throws {
        let hashed = try FileCopier.hash(try step.read(Inputs.self).path, step: step)
        var outputs = Outputs()
        outputs.sha256 = hashed.sha256
        outputs.size = hashed.size
        try step.setOutputs(outputs)
    }
}
