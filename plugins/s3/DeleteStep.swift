import OrchestrateJSON
import OrchestratePluginKit
import OrchestrateS3Auth

/// `s3.delete`: one object, or every object under a prefix (a saga's undo of an s3.upload of a
/// file or of a folder). An object already gone is not an error: S3 answers a DELETE of a
/// missing key with 204 too, and a prefix with nothing under it deletes nothing.
struct DeleteStep: StepDefinition {
    static let id = "s3.delete"
    static let version = "0.2.0"
    static let summary = "Delete an object, or every object under a prefix, from S3 (idempotent: a missing key is not an error)."
    static let documentation = """
        Deletes `key`, or every object under `prefix` (listed page by page, removed with \
        DeleteObjects, 1,000 keys a request). The whole bucket (`prefix: ""`) is refused unless \
        `whole_bucket: true` says so too.
        """
    struct Inputs: StepInputs {
        var connection = ConnectionInputs()
        @Input(help: "the object's key (exactly one of key and prefix)", minLength: 1) var key: String?
        @Input(help: "delete every object under this prefix, ending with \"/\" (\"\" needs whole_bucket: true)") var prefix: String?
        @Input(help: "confirms prefix: \"\", every object of the bucket") var wholeBucket = false
        @Input(help: "keys listed (and deleted) per request, with prefix", minimum: 1, maximum: 1000) var pageSize = 1000
    }
    static let inputSchema = Inputs.schemaText
    struct Outputs: StepOutputs {
        @Output(help: "s3://bucket/key or s3://bucket/prefix") var uri: String
        @Output(help: "objects deleted under the prefix (1 for a key, deleted or already gone)", minimum: 0) var deleted: Int64
    }
    static let outputSchema = Outputs.schemaText

    static func run(_ step: StepContext) throws {
        let inputs = try step.read(Inputs.self)
        let target = try ObjectTarget(key: inputs.key, prefix: inputs.prefix)
        if case .prefix("") = target, !inputs.wholeBucket {
            throw StepError.invalidInput("prefix \"\" names every object of the bucket: add whole_bucket: true to delete them all", code: "invalid_input")
        }
        let client = try S3Client(inputs.connection, step: step)
        var outputs = Outputs()
        switch target {
        case .key(let key):
            _ = try client.send("DELETE", key: key, label: "DELETE \(client.uri(key))", accept: [200, 204])
            step.log(.info, "deleted \(client.uri(key))")
            outputs.uri = client.uri(key)
            outputs.deleted = 1
        case .prefix(let prefix):
            var deleted: Int64 = 0
            try ObjectListing.each(client, prefix: prefix, pageSize: inputs.pageSize) { objects throws(StepError) in
                try step.checkCancellation()
                deleted += try deleteBatch(client, objects.map(\.key))
                step.progress(filesDone: deleted)
            }
            step.log(.info, "deleted \(deleted) objects under \(client.uri(prefix))")
            outputs.uri = client.uri(prefix)
            outputs.deleted = deleted
        }
        try step.setOutputs(outputs)
    }

    /// DeleteObjects of up to 1,000 keys (quiet: the answer lists failures only); a key XML 1.0
    /// cannot carry goes in a DELETE of its own.
    static func deleteBatch(_ client: S3Client, _ keys: [String]) throws(StepError) -> Int64 {
        guard !keys.isEmpty else { return 0 }
        let sendable = keys.filter(isXMLText)
        for key in keys where !isXMLText(key) {
            _ = try client.send("DELETE", key: key, label: "DELETE \(client.uri(key))", accept: [200, 204])
        }
        guard !sendable.isEmpty else { return Int64(keys.count) }
        var xml = "<Delete xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"><Quiet>true</Quiet>"
        for key in sendable { xml += "<Object><Key>\(XML.escape(key))</Key></Object>" }
        xml += "</Delete>"
        let body = Array(xml.utf8)
        let label = "DeleteObjects (\(sendable.count) keys) in \(client.uri(""))"
        let response = try client.send("POST", key: nil, query: [("delete", "")],
                                       headers: [("Content-MD5", S3Crypto.base64(body.withUnsafeBytes { S3Crypto.md5($0) })), ("Content-Type", "application/xml")],
                                       body: .bytes(body), payloadHash: S3Crypto.hex(S3Crypto.sha256(body)), label: label, accept: [200])
        let text = response.bodyText
        let errors = XML.elements("Error", in: text)
        if let first = errors.first {
            let code = XML.value("Code", in: first) ?? "", message = XML.value("Message", in: first) ?? ""
            let key = XML.value("Key", in: first) ?? "?"
            let retryable = ["SlowDown", "InternalError", "ServiceUnavailable"].contains(code)
            let text = "\(label): \(errors.count) keys were not deleted, the first \(client.uri(key)): \(code) \(message)"
            throw retryable ? StepError.retryable(text, code: "s3_\(code)", retryAfter: .seconds(2)) : StepError.permanent(text, code: "s3_\(code)")
        }
        if !text.contains("DeleteResult") {
            throw .retryable("\(label): the answer is not a DeleteResult", code: "s3_protocol")
        }
        return Int64(keys.count)
    }

    /// True when XML 1.0 carries `text` as it is (tab, newline and the characters from U+0020;
    /// a parser would turn a CR into a newline).
    static func isXMLText(_ text: String) -> Bool {
        text.unicodeScalars.allSatisfy { $0.value >= 0x20 || $0 == "\t" || $0 == "\n" }
            && !text.unicodeScalars.contains { $0.value == 0xFFFE || $0.value == 0xFFFF }
    }
}
