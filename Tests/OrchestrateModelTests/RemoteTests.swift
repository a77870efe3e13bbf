// `remotes:` and `with: { remote: NAME }`: a remote's fields become the step's inputs before any
// check, a step's own value wins, references become secrets, and every mistake is a located error.
import OrchestrateJSON
import OrchestrateModel
import OrchestrateTestSupport
import Testing

@Suite struct RemoteTests {
    static let s3Step = StepInfo(id: "s3.upload", inputSchema: [
        "type": "object",
        "properties": [
            "bucket": ["type": "string"], "key": ["type": "string"], "file": ["type": "string"],
            "endpoint": ["type": "string"], "region": ["type": "string"], "access_key_id": ["type": "string"],
            "secret_access_key": ["type": "string"], "connect_timeout": ["type": "integer"],
        ],
        "required": ["bucket", "key", "file"],
        "additionalProperties": false,
    ], outputSchema: nil, acceptsItems: false)
    static let sftpConnect = StepInfo(id: "sftp.connect", inputSchema: [
        "type": "object",
        "properties": ["host": ["type": "string"], "user": ["type": "string"]],
        "required": ["host"],
        "additionalProperties": false,
    ], outputSchema: nil, acceptsItems: false)
    static let catalog = StaticStepCatalog([s3Step, sftpConnect])

    static let userFile = """
        remotes:
          media:
            type: s3
            endpoint: http://127.0.0.1:9000
            bucket: from-file
            access_key_id: AKID
            secret_access_key: { env: MEDIA_SECRET }
          edit-bay:
            type: sftp
            host: edit.example
            user: deploy
            remote_root: /srv/drop
        """

    static func user() throws -> StaticRemotes {
        StaticRemotes(try RemoteCatalog.parse(source: userFile, file: "remotes.yaml"))
    }

    static func load(_ yaml: String) throws -> Workflow {
        try WorkflowLoader.parse(source: yaml, file: "wf.yaml", catalog: catalog, remotes: try user())
    }

    static func errors(_ yaml: String, remotes: (any RemoteDefinitions)? = nil) throws -> [String] {
        let definitions = try remotes ?? user()
        do {
            _ = try WorkflowLoader.parse(source: yaml, file: "wf.yaml", catalog: catalog, remotes: definitions)
            return []
        } catch {
            return error.diagnostics.map(\.description)
        }
    }

    @Test func aRemotesFieldsBecomeTheStepsInputsAndTheStepWins() throws {
        let wf = try Self.load("""
            name: up
            steps:
              up:
                uses: s3.upload
                with: { remote: media, key: a.bin, file: /tmp/a.bin, endpoint: "http://127.0.0.1:9999" }
            """)
        let with = try wf.steps[0].with.evaluate(in: EvaluationContext(secrets: ["__remote__media__secret_access_key": "s3cr3t"]))
        #expect(with["bucket"] == "from-file")
        #expect(with["access_key_id"] == "AKID")
        #expect(with["endpoint"] == "http://127.0.0.1:9999", "the step's own value wins over the remote's")
        #expect(with["remote"] == nil, "the plugin never sees 'remote'")
        #expect(with["secret_access_key"] == "s3cr3t", "a reference is read as a secret at the attempt")
        let secret = try #require(wf.secrets.first)
        #expect(secret.source == .environment("MEDIA_SECRET"))
        #expect(secret.displayName == "remote 'media' (secret_access_key)")
        #expect(secret.location.description == "remotes.yaml:7:24")
    }

    @Test func aWorkflowsRemoteWinsOverTheFilesOfTheSameName() throws {
        let wf = try Self.load("""
            name: up
            remotes:
              media: { type: s3, bucket: from-workflow, secret_access_key: { file: /run/secrets/s3 } }
            steps:
              up: { uses: s3.upload, with: { remote: media, key: k, file: /f } }
            """)
        let with = try wf.steps[0].with.evaluate(in: EvaluationContext(secrets: ["__remote__media__secret_access_key": "x"]))
        #expect(with["bucket"] == "from-workflow")
        #expect(with["access_key_id"] == nil, "the file's remote is not merged in")
        #expect(wf.secrets.first?.source == .file("/run/secrets/s3"))
    }

    @Test func onlyTheInputsAStepTypeDeclaresAreMerged() throws {
        let wf = try Self.load("""
            name: c
            steps:
              c: { uses: sftp.connect, with: { remote: edit-bay } }
            """)
        let with = try wf.steps[0].with.evaluate(in: EvaluationContext())
        #expect(with == ["host": "edit.example", "user": "deploy"], "sftp.connect takes no remote_root")
    }

    @Test func anUnknownRemoteIsALocatedErrorWithADidYouMean() throws {
        let found = try Self.errors("""
            name: up
            steps:
              up:
                uses: s3.upload
                with: { remote: meda, key: a, file: /a }
            """)
        #expect(found.contains { $0.hasPrefix("wf.yaml:5:21: ") && $0.contains("unknown remote 'meda'") && $0.contains("did you mean 'media'?") },
                "\(found)")
        #expect(!found.contains { $0.contains("bucket") }, "no cascade of missing inputs: \(found)")
    }

    @Test func aRemoteOfAnotherTypeIsRefused() throws {
        let found = try Self.errors("""
            name: up
            steps:
              up: { uses: s3.upload, with: { remote: edit-bay, key: a, file: /a, bucket: b } }
            """)
        #expect(found.contains { $0.contains("step type 's3.upload' needs an s3 remote; 'edit-bay' is an sftp remote") }, "\(found)")
    }

    @Test func aSecretFieldWrittenInlineIsRefused() throws {
        let found = try Self.errors("""
            name: up
            remotes:
              leaky: { type: s3, bucket: b, secret_access_key: hunter2 }
              templated: { type: s3, bucket: "${{ inputs.b }}" }
              mistyped: { type: s3, buckt: b }
              odd: { type: webdav }
            steps:
              up: { uses: s3.upload, with: { remote: leaky, key: a, file: /a } }
            """)
        #expect(found.contains { $0.hasPrefix("wf.yaml:3:52: ") && $0.contains("is a secret: give it as { env: VARIABLE } or { file: PATH }") },
                "\(found)")
        #expect(found.contains { $0.contains("remote values are taken literally") })
        #expect(found.contains { $0.contains("unknown field 'buckt'") && $0.contains("did you mean 'bucket'?") })
        #expect(found.contains { $0.contains("unknown remote type 'webdav'") })
    }

    @Test func aRemotesFileThatCannotBeUsedIsSaidWhereTheRemoteIsNamed() throws {
        struct Refused: RemoteDefinitions {
            func userRemotes() -> Result<RemoteCatalog, RemotesUnavailable> {
                .failure(RemotesUnavailable(reason: "orchestrate refuses the remotes file /x/remotes.yaml: it is readable or writable by others"))
            }
        }
        let found = try Self.errors("""
            name: up
            steps:
              up: { uses: s3.upload, with: { remote: media, key: a, file: /a } }
            """, remotes: Refused())
        #expect(found.contains { $0.hasPrefix("wf.yaml:3:42: ") && $0.contains("the remotes file cannot be used: orchestrate refuses") },
                "\(found)")
    }

    @Test func aWorkflowWithoutRemotesNeverReadsTheFile() throws {
        struct Exploding: RemoteDefinitions {
            func userRemotes() -> Result<RemoteCatalog, RemotesUnavailable> { .failure(RemotesUnavailable(reason: "read")) }
        }
        let wf = try WorkflowLoader.parse(source: "name: n\nsteps:\n  c: { uses: sftp.connect, with: { host: h } }\n",
                                          file: "wf.yaml", catalog: Self.catalog, remotes: Exploding())
        #expect(wf.steps.count == 1)
    }

    @Test func aSecretMayComeFromAFile() throws {
        let wf = try WorkflowLoader.parse(source: """
            name: n
            secrets: { token: { file: /run/secrets/token } }
            steps:
              c: { uses: sftp.connect, with: { host: "${{ secrets.token }}" } }
            """, file: "wf.yaml", catalog: Self.catalog)
        #expect(wf.secrets.first?.source == .file("/run/secrets/token"))
    }

    @Test func theEditorSchemaTakesRemotesAndAStepThatNamesOne() throws {
        let dir = TemporaryDirectory("remote-schema")
        let good = dir.write("good.yaml", """
            name: up
            remotes:
              media: { type: s3, bucket: m, secret_access_key: { env: S } }
            steps:
              up: { uses: s3.upload, with: { remote: media, key: k, source: /f } }
            """).path
        let checked = try WorkflowSchemaFile.check([good])
        #expect(checked.status == 0, "a step naming a remote need not repeat bucket: \(checked.stdout)\(checked.stderr)")
        let bad = dir.write("bad.yaml", """
            name: up
            remotes:
              media: { type: s3, secret_access_key: inline }
            steps:
              up: { uses: s3.upload, with: { key: k, source: /f } }
            """).path
        let refused = try WorkflowSchemaFile.check([bad])
        #expect(refused.status == 1, "an inline secret, and bucket missing without a remote: \(refused.stdout)")
    }
}
