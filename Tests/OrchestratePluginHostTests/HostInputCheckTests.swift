// The host's promise to every plugin (plugin.h): the resolved `with:` is checked against the
// schema and its defaults are filled in before `run` is called.
import Foundation
import OrchestrateJSON
import OrchestratePluginHost
import OrchestrateTestSupport
import Testing

@Suite struct HostInputCheckTests {
    @Test func aCPluginReceivesTheDefaultsItDidNotFill() async throws {
        let dir = TemporaryDirectory()
        let file = dir.file("out").path
        // test.typed fails when count or label is missing: it has no default of its own.
        let outputs = try #require(try await runFixture("test.typed", ["file": .string(file)]).outputs)
        #expect(outputs["with"] == ["file": .string(file), "count": 3, "label": "plain"])
        #expect(try String(contentsOfFile: file, encoding: .utf8) == "plain 3\n")
        // Given values stand; null where the schema wants an integer counts as absent.
        let given = try #require(try await runFixture("test.typed", ["file": .string(file), "count": 9, "label": .null]).outputs)
        #expect(given["with"] == ["file": .string(file), "count": 9, "label": "plain"])
    }

    @Test func aValueViolatingTheSchemaFailsBeforeThePluginRuns() async throws {
        let dir = TemporaryDirectory()
        let file = dir.file("out").path
        for (inputs, message) in [
            (["file": .string(file), "count": "abc"] as JSONValue, #"input 'count' must be an integer, not a string ("abc")"#),
            (["file": .string(file), "count": 0], "input 'count' must be at least 1, not 0"),
            (["file": .string(file), "colour": "red"], "unknown input 'colour' for step type 'test.typed'"),
            (["count": 2], "missing required input 'file' for step type 'test.typed'"),
            ("not an object", "the inputs must be a JSON object, not string"),
        ] {
            let failure = try #require(try await runFixture("test.typed", inputs).failure)
            #expect(failure.kind == .invalidInput && failure.code == "invalid_input")
            #expect(failure.message == "step 'step-1': \(message)")
        }
        #expect(!FileManager.default.fileExists(atPath: file), "the plugin ran")
    }

    /// The built-in plugins' schemas, generated from their declarations now, name the same inputs
    /// (deprecated aliases included), require the same ones and keep every default they had.
    @Test(arguments: [
        ("fs", "fs.copy", ["destination", "if_exists", "overwrite", "preserve_mtime", "sha256", "source"], ["source", "destination"]),
        ("fs", "fs.move", ["destination", "overwrite", "source"], ["source", "destination"]),
        ("fs", "fs.checksum", ["path"], ["path"]),
        ("exec", "exec", ["command", "cwd", "env", "inherit_env", "kill_grace", "retryable_exit_codes", "stdin"], ["command"]),
        ("http", "http.download", ["ca_file", "connect_timeout", "destination", "follow_redirects", "headers", "if_exists", "insecure",
                                   "max_rate", "max_size", "min_speed", "min_speed_time", "preserve_mtime", "sha256", "url"], ["url", "destination"]),
        ("http", "http.request", ["body", "ca_file", "connect_timeout", "expect_status", "follow_redirects", "form", "headers",
                                  "insecure", "json", "max_body", "max_rate", "method", "min_speed", "min_speed_time", "query", "url"],
         ["url"]),
        ("http", "http.upload", ["ca_file", "chunk_size", "connect_timeout", "content_type", "create", "file", "follow_redirects",
                                 "headers", "insecure", "max_rate", "metadata", "min_speed", "min_speed_time", "protocol", "url"],
         ["url", "file"]),
        ("sftp", "sftp.connect", HostInputCheckTests.connection, ["host", "user"]),
        ("sftp", "sftp.upload", HostInputCheckTests.connection + HostInputCheckTests.transfer + ["create_root", "destination", "if_exists", "parallel", "preserve_mtime", "remote_root", "session", "sha256", "source"],
         ["source", "destination"]),
        ("sftp", "sftp.download", HostInputCheckTests.connection + HostInputCheckTests.transfer + ["create_root", "destination", "if_exists", "max_files", "parallel", "preserve_mtime", "recursive", "remote_root", "session", "sha256", "source"],
         ["source", "destination"]),
        ("sftp", "sftp.accept-paths", HostInputCheckTests.connection + HostInputCheckTests.transfer + ["close_when_idle", "create_root", "item_attempts", "parallel", "remote_root", "session"],
         []),
    ])
    func builtInSchemasKeepTheirInputs(plugin: String, stepType: String, names: [String], required: [String]) throws {
        let step = try #require(try Fixtures.builtIn(plugin).stepTypes.first { $0.id == stepType })
        let properties = try #require(step.inputSchema["properties"]?.objectValue)
        #expect(properties.keys.sorted() == names.sorted())
        #expect(Set(step.inputSchema["required"]?.arrayValue?.compactMap(\.stringValue) ?? []) == Set(required))
        #expect(step.inputSchema["additionalProperties"] == false)
        for (name, value) in Self.previousDefaults[stepType] ?? [:] {
            #expect(properties[name]?["default"] == value, "\(stepType).\(name)")
        }
    }

    static let connection = ["agent", "connect_timeout", "host", "host_key_policy", "io_timeout", "keepalive", "key_file", "known_hosts",
                             "passphrase", "password", "port", "proxy_jump", "ssh_config", "transport", "user"]
    static let transfer = ["chunk_kib", "connections", "limit_kibps", "max_rate", "parallel_threshold_mib"]

    /// The defaults the hand-written schemas declared (sftp.accept-paths said 4 connections, but
    /// its code used 1 unless given: the declaration now says 1, which is what it did).
    static let previousDefaults: [String: [String: JSONValue]] = {
        let connection: [String: JSONValue] = ["agent": false, "connect_timeout": 30, "host_key_policy": "strict", "io_timeout": 60,
                                               "keepalive": 15, "port": 22, "transport": "libssh2"]
        let tree = connection.merging(["chunk_kib": 4096, "connections": 4, "parallel": 8, "parallel_threshold_mib": 64,
                                       "remote_root": "."]) { a, _ in a }
        return [
            "exec": ["inherit_env": true, "kill_grace": "5s"], "fs.copy": ["overwrite": false], "fs.move": ["overwrite": false],
            "sftp.connect": connection, "sftp.upload": tree, "sftp.download": tree,
            "sftp.accept-paths": tree.merging(["parallel": 4, "connections": 1, "close_when_idle": false, "item_attempts": 3]) { _, b in b },
        ]
    }()
}
