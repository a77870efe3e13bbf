// A fake plugin catalog with realistic input schemas, standing in for the plugin host.
import OrchestrateJSON
import OrchestrateModel

struct TestCatalog: StepCatalog {
    static let types: [String: StepInfo] = {
        let http: JSONValue = [
            "type": "object",
            "properties": [
                "method": ["type": "string", "enum": ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD"]],
                "url": ["type": "string", "minLength": 1],
                "headers": ["type": "object", "additionalProperties": ["type": "string"]],
                "json": [:],
                "body": ["type": "string"],
                "timeout_ms": ["type": "integer", "minimum": 1],
                "expect_status": ["type": "array", "items": ["type": "integer", "minimum": 100, "maximum": 599]],
            ],
            "required": ["url"],
            "additionalProperties": false,
        ]
        let upload: JSONValue = [
            "type": "object",
            "properties": [
                "url": ["type": "string"],
                "file": ["type": "string"],
                "protocol": ["type": "string", "enum": ["vimeo-streaming", "tus", "put"]],
                "chunk_size": ["type": ["integer", "string"]],
                "create": ["type": "boolean"],
                "metadata": ["type": "object", "additionalProperties": ["type": "string"]],
            ],
            "required": ["url", "file"],
            "additionalProperties": false,
            // As the real plugin says it: one input that needs another.
            "if": ["required": ["metadata"]],
            "then": ["required": ["create"], "properties": ["create": ["const": true]],
                     "description": "metadata is sent only on creation; set create: true"],
        ]
        let exec: JSONValue = [
            "type": "object",
            "properties": [
                "command": ["type": "array", "items": ["type": "string"]],
                "cwd": ["type": "string"],
                "env": ["type": "object", "additionalProperties": ["type": "string"]],
            ],
            "required": ["command"],
            "additionalProperties": false,
        ]
        let copy: JSONValue = [
            "type": "object",
            "properties": [
                "source": ["type": "string"],
                "destination": ["type": "string"],
                "overwrite": ["type": "boolean"],
                "sha256": ["type": "string", "pattern": "^[0-9a-fA-F]{64}$", "description": "expected SHA-256 (hex)"],
            ],
            "required": ["source", "destination"],
            "additionalProperties": false,
        ]
        let session: JSONValue = [
            "type": "object",
            "properties": ["host": ["type": "string"], "paths": ["type": "array", "items": ["type": "string"]]],
            "required": ["host"],
        ]
        // As the real plugin declares them: the outputs a reference may read.
        let uploadOutputs: JSONValue = [
            "type": "object",
            "properties": ["bytes": ["type": "integer"], "status": ["type": "integer"], "upload_url": [:]],
        ]
        let list: [StepInfo] = [
            StepInfo(id: "http.request", inputSchema: http, outputSchema: ["type": "object"], acceptsItems: false),
            StepInfo(id: "http.upload", inputSchema: upload, outputSchema: uploadOutputs, acceptsItems: false),
            StepInfo(id: "exec", inputSchema: exec, outputSchema: nil, acceptsItems: false),
            StepInfo(id: "fs.copy", inputSchema: copy, outputSchema: nil, acceptsItems: false),
            StepInfo(id: "aspera.session", inputSchema: session, outputSchema: nil, acceptsItems: true),
        ]
        return Dictionary(uniqueKeysWithValues: list.map { ($0.id, $0) })
    }()

    func stepInfo(for id: String) -> StepInfo? { Self.types[id] }
    var stepTypeIDs: [String] { Self.types.keys.sorted() }
}
