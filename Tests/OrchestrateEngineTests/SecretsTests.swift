import Foundation
import OrchestrateJSON
import OrchestrateTestSupport
import Testing

/// A secret value never reaches the state store, the logs, or the events.
@Suite struct SecretsTests {
    let h = Harness()
    let secret = "s3cr3t-VALUE-8f2e71"

    @Test func aSecretNeverAppearsInTheStoreLogsOrEvents() throws {
        let file = h.workflow("""
            version: 1
            name: secrets
            secrets:
              token: { env: TEST_TOKEN }
            steps:
              echo:
                uses: test.echo
                with: { header: "bearer ${{ secrets.token }}" }
              shell:
                uses: exec
                needs: [echo]
                with:
                  command: [sh, -c, 'echo "token is $TOKEN"; echo "again $TOKEN" >&2']
                  env: { TOKEN: "${{ secrets.token }}" }
            outputs:
              header: "${{ steps.echo.outputs.with.header }}"
            """)
        let env = ["TEST_TOKEN": secret]
        let human = try h.orchestrate(["run", file], environment: env)
        #expect(human.status == 0, "\(human.stdout)\n\(human.stderr)")
        let json = try h.orchestrate(["run", file, "--json"], environment: env)
        #expect(json.status == 0)
        let runID = try #require(try h.runIDs().last)
        let events = try h.orchestrate(["events", runID])
        let status = try h.orchestrate(["status", runID, "--json"])

        // The step saw the real value (the shell printed it, redacted on the way out).
        #expect(human.stdout.contains("token is ***"))
        #expect(human.stdout.contains("again ***"))
        #expect(human.stdout.contains("header: bearer ***"))
        for (name, text) in [("run output", human.stdout + human.stderr), ("--json", json.stdout + json.stderr),
                             ("events", events.stdout), ("status", status.stdout)] {
            #expect(!text.contains(secret), "the secret leaked into \(name)")
        }
        // Nothing in the state directory holds it: database, WAL, run directories.
        let enumerator = FileManager.default.enumerator(atPath: h.state)!
        var scanned = 0
        while let relative = enumerator.nextObject() as? String {
            let full = h.state + "/" + relative
            guard let data = FileManager.default.contents(atPath: full) else { continue }
            scanned += 1
            #expect(data.range(of: Data(secret.utf8)) == nil, "the secret is in \(relative)")
        }
        // SQLite folds the WAL into the database and removes it when the last connection closes;
        // the database itself must have been scanned.
        #expect(scanned >= 1 && FileManager.default.fileExists(atPath: h.state + "/state.sqlite"))
    }

    @Test func aSecretCannotBecomeAnIdempotencyKey() throws {
        // Keys are stored in the state store, so the validator refuses a secret in one.
        let file = h.workflow("""
            version: 1
            name: secrets
            secrets:
              token: { env: TEST_TOKEN }
            steps:
              echo: { uses: test.echo, idempotency_key: "${{ secrets.token }}" }
            """)
        let result = try h.orchestrate(["validate", file])
        #expect(result.status == 2)
        #expect(result.stderr.contains("wf.yaml:6:"))
        #expect(result.stderr.contains("idempotency_key"))
    }

    @Test func aMissingSecretIsAUsageError() throws {
        let file = h.workflow("""
            version: 1
            name: secrets
            secrets:
              token: { env: TEST_TOKEN_NOT_SET }
            steps:
              echo: { uses: test.echo, with: { v: "${{ secrets.token }}" } }
            """)
        let result = try h.orchestrate(["run", file])
        #expect(result.status == 2)
        #expect(result.stderr.contains("TEST_TOKEN_NOT_SET"))
        #expect(result.stderr.contains("wf.yaml:4:"))
    }
}
