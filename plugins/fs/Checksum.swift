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
    static let outputSchema = #"""
        {"type":"object","properties":{
           "sha256":{"type":"string","description":"SHA-256 (hex)"},
           "size":{"type":"integer","description":"bytes"}}}
        """#

    static func run(_ step: StepContext) throws {
        let hashed = try FileCopier.hash(try step.read(Inputs.self).path, step: step)
        step.setOutput("sha256", .string(hashed.sha256))
        step.setOutput("size", .int(hashed.size))
    }
}
