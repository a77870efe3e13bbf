import OrchestratePluginKit

/// `fs.checksum`: SHA-256 and size of a file.
struct Checksum: StepDefinition {
    static let id = "fs.checksum"
    static let version = "1.0.0"
    static let summary = "SHA-256 and size of a file."
    static let inputSchema = #"""
        {"type":"object","additionalProperties":false,"required":["path"],
         "properties":{"path":{"type":"string","minLength":1,"description":"file to hash"}}}
        """#
    static let outputSchema = #"""
        {"type":"object","properties":{
           "sha256":{"type":"string","description":"SHA-256 (hex)"},
           "size":{"type":"integer","description":"bytes"}}}
        """#

    static func run(_ step: StepContext) throws {
        let hashed = try FileCopier.hash(try step.string("path"), step: step)
        step.setOutput("sha256", .string(hashed.sha256))
        step.setOutput("size", .int(hashed.size))
    }
}
