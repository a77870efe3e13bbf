import OrchestratePluginKit

/// `s3.delete`: removes one object (a saga's undo of an s3.upload). An object already gone is
/// not an error: S3 answers a DELETE of a missing key with 204 too.
struct DeleteStep: StepDefinition {
    static let id = "s3.delete"
    static let version = "0.1.0"
    static let summary = "Delete an object from S3 (idempotent: a missing key is not an error)."
    struct Inputs: StepInputs {
        var connection = ConnectionInputs()
        @Input(help: "the object's key", minLength: 1) var key: String
    }
    static let inputSchema = Inputs.schemaText
    static let outputSchema = #"{"type":"object","properties":{"uri":{"type":"string"}}}"#

    static func run(_ step: StepContext) throws {
        let inputs = try step.read(Inputs.self)
        let client = try S3Client(inputs.connection, step: step)
        try ObjectKey.check(inputs.key)
        _ = try client.send("DELETE", key: inputs.key, label: "DELETE \(client.uri(inputs.key))", accept: [200, 204])
        step.log(.info, "deleted \(client.uri(inputs.key))")
        step.setOutput("uri", .string(client.uri(inputs.key)))
    }
}
