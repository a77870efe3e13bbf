import OrchestrateJSON
import OrchestratePluginKit

/// `sftp.connect`: opens a verified, authenticated connection and keeps it in this process's
/// session registry; its `session` output is what later steps pass back. The engine re-runs it
/// on resume (ORC_STEP_OPENS_SESSION) and closes the session once no step needs it.
struct ConnectStep: StepDefinition {
    static let id = "sftp.connect"
    static let version = "1.0.0"
    static let summary = "Open an SFTP session (host key checked against known_hosts) for later sftp steps."
    static let documentation = """
        Connects to `host`:`port` as `user`, checks the server's host key against `known_hosts` \
        (OpenSSH format, hashed entries included) under `host_key_policy` (`strict`: unknown keys \
        refused, the message names the SHA256 fingerprint; `accept-new`: unknown keys recorded; \
        `off`: no check; a changed key is refused under every policy but `off`), then \
        authenticates by `key_file` (+ `passphrase`), `password` or `agent`. Outputs `session`, to \
        give to sftp.upload / sftp.download / sftp.accept-paths as `session:`.
        """
    struct Inputs: StepInputs {
        var connection = ConnectionInputs()
        static var schemaRules: [String: JSONValue] { ["required": ["host", "user"]] }
    }
    static let inputSchema = Inputs.schemaText
    struct Outputs: StepOutputs {
        @Output(help: "opaque id of the open session (give it to the sftp steps as session:)") var session: String
        @Output(help: "the host connected to") var host: String
        @Output(help: "its port") var port: Int
        @Output(help: "the user logged in as") var user: String
        @Output(help: "the server's host key, SHA256:… as OpenSSH prints it") var fingerprint: String
    }
    static let outputSchema = Outputs.schemaText
    static let opensSession = true

    static func run(_ step: StepContext) throws {
        let parameters = try ConnectionParameters(try step.read(Inputs.self).connection)
        let connection = try Connection(parameters, step: step)
        let session = Sessions.register(parameters)
        session.adopt(connection)
        step.log(.info, "connected to \(parameters.host):\(parameters.port) as \(parameters.user) (\(connection.fingerprint))")
        var outputs = Outputs()
        outputs.session = session.id
        outputs.host = parameters.host
        outputs.port = parameters.port
        outputs.user = parameters.user
        outputs.fingerprint = connection.fingerprint
        try step.setOutputs(outputs)
    }

    static func closeSession(outputs: JSONValue) {
        if let id = outputs["session"]?.stringValue { Sessions.close(id) }
    }
}
