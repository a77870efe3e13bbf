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
        try expectSecretNowhereInTheStore(runID: runID)
    }

    /// Nothing in the state directory holds the secret (database, WAL, run directories), nor, on
    /// PostgreSQL, the whole database (which must hold the run).
    private func expectSecretNowhereInTheStore(runID: String) throws {
        let enumerator = FileManager.default.enumerator(atPath: h.state)!
        var scanned = 0
        while let relative = enumerator.nextObject() as? String {
            guard let data = FileManager.default.contents(atPath: h.state + "/" + relative) else { continue }
            scanned += 1
            #expect(data.range(of: Data(secret.utf8)) == nil, "the secret is in \(relative)")
        }
        if let url = h.storeURL {
            let dump = try EngineTestStore.dump(url)
            #expect(dump.contains(runID) && !dump.contains(secret), "the secret is in the PostgreSQL store")
        } else {
            // SQLite folds the WAL into the database and removes it when the last connection
            // closes; the database itself must have been scanned.
            #expect(scanned >= 1 && FileManager.default.fileExists(atPath: h.state + "/state.sqlite"))
        }
    }

    /// A fan-out whose list holds a secret's value (here from `env`, the first thing the run
    /// does, before any attempt resolved the secret): each item gets its real element, and the
    /// journal holds the list, the items' rows and their concurrency keys masked.
    @Test func aFanOutOverASecretsValueKeepsItOutOfTheStore() throws {
        let file = h.workflow("""
            version: 1
            name: fan-out-secret
            secrets:
              token: { env: TEST_TOKEN }
            steps:
              each:
                uses: test.echo
                for_each: ["${{ env.TEST_TOKEN }}/a", "plain/b", "${{ env.TEST_TOKEN }}/a"]
                concurrency: [{ key: "dest:${{ item }}", limit: 1 }]  # the two secret items: one waits
                with: { path: "${{ item }}", seen: "${{ item == secrets.token + '/a' }}" }
            """)
        let result = try h.orchestrate(["run", file, "--json"], environment: ["TEST_TOKEN": secret])
        #expect(result.status == 0, "\(result.stdout)\n\(result.stderr)")
        let runID = try #require(try h.runIDs().last)
        let steps = try h.status(runID)["steps"]?.arrayValue ?? []
        let first = steps.first { $0["id"]?.stringValue == "each[0]" }
        #expect(first?["outputs"]?["with"]?["path"]?.stringValue == "***/a", "\(steps)")
        #expect(first?["outputs"]?["with"]?["seen"] == .bool(true), "the item did not get the real element")
        #expect(steps.first { $0["id"]?.stringValue == "each[1]" }?["outputs"]?["with"]?["path"]?.stringValue == "plain/b")
        #expect(!result.stdout.contains(secret))
        // (Not with a query naming the secret: its command line would show the secret to
        // `aSecretNeverAppearsInAnyProcessListing`, which runs beside this test.)
        try expectSecretNowhereInTheStore(runID: runID)
    }

    /// While a run that hands a secret to child processes executes (exec through `env`, through
    /// `stdin`, and exec inside an isolated plugin runner), no process on the machine shows it
    /// in its command line (/proc/PID/cmdline, what `ps` shows every user); afterwards no output
    /// of the run holds it: stdout, stderr, events, status, the state directory's files.
    @Test func aSecretNeverAppearsInAnyProcessListing() throws {
        let marks = h.path("marks")
        try FileManager.default.createDirectory(atPath: marks, withIntermediateDirectories: true)
        let file = h.workflow("""
            version: 1
            name: listing
            secrets:
              token: { env: TEST_TOKEN }
            steps:
              by_env:
                uses: exec
                with:
                  command: [sh, -c, 'touch "$MARKS/env"; sleep 2 & wait; test "$TOKEN" = "$EXPECTED"']
                  env: { TOKEN: "${{ secrets.token }}", MARKS: "\(marks)", EXPECTED: "${{ secrets.token }}" }
              by_stdin:
                uses: exec
                with:
                  command: [sh, -c, 'read -r T; touch "$MARKS/stdin"; sleep 2 & wait; test -n "$T"']
                  stdin: "${{ secrets.token }}\n"
                  env: { MARKS: "\(marks)" }
              isolated:
                uses: exec
                isolation: process
                with:
                  command: [sh, -c, 'touch "$MARKS/isolated"; sleep 2 & wait; test -n "$TOKEN"']
                  env: { TOKEN: "${{ secrets.token }}", MARKS: "\(marks)" }
              header:
                uses: test.echo
                with: { header: "bearer ${{ secrets.token }}" }
            """)
        let out = h.path("out.log"), err = h.path("err.log")
        let child = try SpawnedChild([TestPaths.orchestrate.path, "run", file, "--json"] + h.baseArguments,
                                     stdout: out, stderr: err, environment: ["TEST_TOKEN": secret])
        // Scan every process's command line until the run ends; count the run's own children
        // seen (the exec'd shells and sleeps, the isolated runner), so the scan cannot pass by
        // looking at nothing.
        var leaks = Set<String>()
        var seenInTree = Set<String>()
        var status: Int32?
        let needle = Data(secret.utf8)
        let deadline = Date().addingTimeInterval(60)
        while status == nil {
            for entry in (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? [] where Int32(entry) != nil {
                guard let cmdline = FileManager.default.contents(atPath: "/proc/\(entry)/cmdline") else { continue }
                let words = cmdline.split(separator: 0).map { String(decoding: $0, as: UTF8.self) }
                if cmdline.range(of: needle) != nil { leaks.insert("pid \(entry): \(words.joined(separator: " "))") }
                if Self.descends(Int32(entry)!, from: child.pid), let name = words.first {
                    seenInTree.insert((name as NSString).lastPathComponent)
                }
            }
            status = child.poll()
            if status == nil, Date() > deadline { status = child.wait(timeout: 0) }
            usleep(10_000)
        }
        #expect(status == 0, "\((try? String(contentsOfFile: err, encoding: .utf8)) ?? "")")
        #expect(leaks.isEmpty, "the secret is in a process listing: \(leaks)")
        #expect(seenInTree.isSuperset(of: ["sh", "sleep"]), "the scan saw \(seenInTree)")
        #expect(seenInTree.contains { $0.contains("runner") }, "the isolated runner was never seen: \(seenInTree)")
        #expect(Set((try? FileManager.default.contentsOfDirectory(atPath: marks)) ?? []) == ["env", "stdin", "isolated"])

        let runID = try #require(try h.runIDs().last)
        var outputs = [("stdout", out), ("stderr", err)].map { ($0.0, (try? String(contentsOfFile: $0.1, encoding: .utf8)) ?? "") }
        outputs.append(("events", try h.orchestrate(["events", runID, "--json"]).stdout))
        outputs.append(("status", try h.orchestrate(["status", runID, "--json"]).stdout))
        for (name, text) in outputs { #expect(!text.contains(secret), "the secret leaked into \(name)") }
        #expect(outputs[0].1.contains("step.succeeded"))
        try expectSecretNowhereInTheStore(runID: runID)
    }

    /// Whether `pid`'s chain of parents reaches `ancestor` (from /proc/PID/stat's ppid field).
    static func descends(_ pid: Int32, from ancestor: Int32) -> Bool {
        var current = pid
        for _ in 0 ..< 32 {
            if current == ancestor { return true }
            guard current > 1, let stat = try? String(contentsOfFile: "/proc/\(current)/stat", encoding: .utf8),
                  let close = stat.lastIndex(of: ")") else { return false }
            let fields = stat[stat.index(after: close)...].split(separator: " ")
            guard fields.count > 1, let parent = Int32(fields[1]) else { return false }
            current = parent
        }
        return false
    }

    @Test func aSecretInAnExecCommandLineIsRefused() throws {
        let file = h.workflow("""
            version: 1
            name: argv
            secrets:
              token: { env: TEST_TOKEN }
            steps:
              call:
                uses: exec
                with: { command: [curl, -H, "Authorization: bearer ${{ secrets.token }}", "https://example.com"] }
            """)
        let result = try h.orchestrate(["validate", file])
        #expect(result.status == 2)
        #expect(result.stderr.contains("wf.yaml:8:"), "\(result.stderr)")
        #expect(result.stderr.contains("secrets cannot be used in exec's 'command'"), "\(result.stderr)")
    }

    /// `env.TEST_TOKEN`, where TEST_TOKEN backs a declared secret, is that secret: refused where
    /// a secret is (exec's command line, outputs, keys), masked where it may go.
    @Test func anEnvironmentVariableBehindASecretIsThatSecret() throws {
        let refused = h.workflow("""
            version: 1
            name: env-secret
            secrets:
              token: { env: TEST_TOKEN }
            steps:
              call:
                uses: exec
                with: { command: [curl, -H, "Authorization: bearer ${{ env.TEST_TOKEN }}", "https://example.com"] }
            outputs:
              token: "${{ env.TEST_TOKEN }}"
            """, name: "refused.yaml")
        let result = try h.orchestrate(["validate", refused])
        #expect(result.status == 2)
        #expect(result.stderr.contains("refused.yaml:8:60: error: env.TEST_TOKEN is the secret 'token' (secrets: token: { env: TEST_TOKEN }): "
            + "secrets cannot be used in exec's 'command'"), "\(result.stderr)")
        #expect(result.stderr.contains("refused.yaml:10:15: error: env.TEST_TOKEN is the secret 'token'"), "\(result.stderr)")
        #expect(result.stderr.contains("secrets cannot be used in outputs"), "\(result.stderr)")

        let file = h.workflow("""
            version: 1
            name: env-secret
            secrets:
              token: { env: TEST_TOKEN }
            steps:
              echo:
                uses: test.echo
                with: { header: "bearer ${{ env.TEST_TOKEN }}" }
              shell:
                uses: exec
                needs: [echo]
                with:
                  command: [sh, -c, 'echo "token is $TOKEN"']
                  env: { TOKEN: "${{ env.TEST_TOKEN }}" }
            """)
        let run = try h.orchestrate(["run", file, "--json"], environment: ["TEST_TOKEN": secret])
        #expect(run.status == 0, "\(run.stdout)\n\(run.stderr)")
        #expect(run.stdout.contains("token is ***"), "\(run.stdout)")
        let runID = try #require(try h.runIDs().last)
        let steps = try h.status(runID)["steps"]?.arrayValue ?? []
        let echoed = steps.first { $0["id"]?.stringValue == "echo" }?["outputs"]?["with"]?["header"]?.stringValue
        #expect(echoed == "bearer ***", "\(steps)")
        let events = try h.orchestrate(["events", runID])
        for (name, text) in [("--json", run.stdout + run.stderr), ("events", events.stdout)] {
            #expect(!text.contains(secret), "the secret leaked into \(name)")
        }
        try expectSecretNowhereInTheStore(runID: runID)
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

    /// A secret kept in a file (`{ file: PATH }`) is read at the run, its final line break
    /// dropped. A file another user could have written (theirs, or writable by a group other
    /// than root's or by everyone), a FIFO (which would hang the read until someone wrote to
    /// it), a device, or more than 64 KiB is refused with exit status 2 and the reason, and
    /// nothing runs.
    @Test func aSecretFromAFileIsReadOnlyFromAFileNobodyElseCouldHaveWritten() throws {
        let secretFile = h.path("token")
        let out = h.path("out")
        let file = h.workflow("""
            version: 1
            name: from-file
            secrets:
              token: { file: "\(secretFile)" }
            steps:
              use: { uses: test.append, with: { file: "\(out)", line: "${{ secrets.token }}" } }
            """)
        #expect(FileManager.default.createFile(atPath: secretFile, contents: Data((secret + "\n").utf8),
                                               attributes: [.posixPermissions: 0o600]))
        let ran = try h.orchestrate(["run", file])
        #expect(ran.status == 0, "\(ran.stderr)")
        #expect(h.lines("out") == [secret])
        #expect(!ran.stdout.contains(secret) && !ran.stderr.contains(secret))

        func expectRefused(_ why: String, sourceLocation: SourceLocation = #_sourceLocation) throws {
            try? FileManager.default.removeItem(atPath: out)
            let result = try ChildProcess.run(URL(fileURLWithPath: "/usr/bin/timeout"),
                                              ["-k", "5", "20", TestPaths.orchestrate.path, "run", file] + h.baseArguments)
            #expect(result.status == 2, "\(result.stderr)", sourceLocation: sourceLocation)
            #expect(result.stderr.contains("is read from \(secretFile), which \(why)"), "\(result.stderr)", sourceLocation: sourceLocation)
            #expect(!FileManager.default.fileExists(atPath: out), "the step did not run", sourceLocation: sourceLocation)
        }
        #expect(chown(secretFile, 65534, 65534) == 0)
        try expectRefused("belongs to another user (uid 65534), who could have planted it")
        #expect(chown(secretFile, 0, 65534) == 0 && chmod(secretFile, 0o620) == 0)
        try expectRefused("others can write to (mode 620)")
        #expect(chown(secretFile, 0, 0) == 0 && chmod(secretFile, 0o606) == 0)
        try expectRefused("others can write to (mode 606)")
        #expect(unlink(secretFile) == 0 && mkfifo(secretFile, 0o600) == 0)
        try expectRefused("is not a regular file")
        #expect(unlink(secretFile) == 0 && symlink("/dev/zero", secretFile) == 0)
        try expectRefused("is not a regular file")
        #expect(unlink(secretFile) == 0)
        #expect(FileManager.default.createFile(atPath: secretFile, contents: Data(count: (64 << 10) + 1),
                                               attributes: [.posixPermissions: 0o600]))
        try expectRefused("is larger than 64 KiB")
        #expect(unlink(secretFile) == 0)
        try expectRefused("does not exist")
        // Root's group may write, as for every state file.
        #expect(FileManager.default.createFile(atPath: secretFile, contents: Data(secret.utf8), attributes: [.posixPermissions: 0o620]))
        #expect(chown(secretFile, 0, 0) == 0)
        #expect(try h.orchestrate(["run", file]).status == 0)
        #expect(h.lines("out") == [secret])
    }
}
