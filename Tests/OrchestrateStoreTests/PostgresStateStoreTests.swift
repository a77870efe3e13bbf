import Foundation
import OrchestrateStore
import OrchestrateTestSupport
import Testing

/// What only the PostgreSQL store promises: leases by the server's clock that fence their
/// holder, wake-ups by NOTIFY, schema creation by several nodes at once, riding out a server
/// restart, and errors that never show the password.
@Suite(.serialized) struct PostgresStateStoreTests {
    func freshStore() throws -> (PostgresStateStore, String) {
        let url = try PostgresServer.shared().createDatabase()
        return (try PostgresStateStore(connection: url), url)
    }

    func makeRun(_ store: PostgresStateStore, _ id: String, status: RunStatus = .running) throws {
        try store.createRun(RunRecord(id: id, workflowName: "wf", workflowFile: "/wf.yaml", workflowSource: "", inputs: [:],
                                      status: status, createdAt: 1, runDir: "runs/\(id)"), events: [])
    }

    @Test func anExpiredLeaseCanNeitherBeRenewedNorCommitUnder() throws {
        let (store, _) = try freshStore()
        #expect(store.fencesByLease)
        try makeRun(store, "r1")
        #expect(try store.claimRun("r1", owner: .current, lease: 0.3))
        var batch = JournalBatch()
        batch.fence = ("r1", .current)
        batch.events = [EventRecord(runID: "r1", time: 1, type: .stepStarted, step: "a")]
        try store.commit(batch)
        Thread.sleep(forTimeInterval: 0.5)
        // Nobody took it over, and still: the lease ran out, so this owner is fenced.
        #expect(try store.renewLease("r1", owner: .current, lease: 60).owned == false)
        #expect(throws: StoreError.self) { try store.commit(batch) }
        #expect(try store.events(runID: "r1", afterSeq: 0, limit: 10).count == 1)
    }

    @Test func leasesAreJudgedByTheServersClock() throws {
        let (store, _) = try freshStore()
        let serverNow = try store.now()
        #expect(abs(serverNow - Date().timeIntervalSince1970) < 5)
        try makeRun(store, "r1")
        #expect(try store.claimRun("r1", owner: OwnerIdentity(node: "far", pid: 1, startTime: 1), lease: 30))
        let until = try #require(try store.run("r1")?.leaseUntil)
        #expect(abs(until - (serverNow + 30)) < 2)
    }

    @Test func severalNodesCreatingTheSchemaAtOnceAllSucceed() throws {
        for _ in 0..<3 {
            let url = try PostgresServer.shared().createDatabase()
            let failures = Collected<String>()
            DispatchQueue.concurrentPerform(iterations: 4) { _ in
                do { _ = try PostgresStateStore(connection: url) } catch { failures.add("\(error)") }
            }
            #expect(failures.all.isEmpty, "\(failures.all)")
            let versions = try PostgresServer.shared().sql("SELECT count(*) FROM orchestrate_schema",
                                                           database: String(url.split(separator: "/").last!))
            #expect(versions == "2", "each migration applied once (v1 schema, v2 bandwidth timetables)")
        }
    }

    @Test func aSubmissionWakesAWatchingWorkerAtOnce() throws {
        let (store, url) = try freshStore()
        let submitter = try PostgresStateStore(connection: url)
        let woken = NSCondition()
        let wakes = Collected<Double>()
        let watch = try #require(try store.watchForWork {
            woken.withLock {
                wakes.add(Date().timeIntervalSince1970)
                woken.signal()
            }
        })
        defer { watch.cancel() }
        var seen = 0
        var latencies: [Double] = []
        for i in 0..<10 {
            let before = Date().timeIntervalSince1970
            try makeRun(submitter, "r\(i)", status: .queued)
            let woke = woken.withLock { () -> Double? in
                let deadline = Date().addingTimeInterval(2)
                while wakes.all.count == seen { if !woken.wait(until: deadline) { break } }
                defer { seen = wakes.all.count }
                return wakes.all.count > seen ? wakes.all[seen] : nil
            }
            latencies.append(try #require(woke) - before)
        }
        // Far under a poll interval; the figure itself is measured in bench/queue.
        #expect(latencies.sorted()[5] < 0.1, "wake-up latencies \(latencies)")
    }

    @Test func anUnreachableServerIsAClearErrorWithoutThePassword() throws {
        let port = Ports.free()
        do {
            _ = try PostgresStateStore(connection: "postgresql://orc:s3cret-pw@127.0.0.1:\(port)/orchestrate")
            Issue.record("connected to nothing")
        } catch {
            let text = "\(error)"
            #expect(text.contains("postgresql://orc:***@127.0.0.1:\(port)/orchestrate"), "\(text)")
            #expect(!text.contains("s3cret-pw"))
        }
    }

    @Test func theStoreCarriesOnAfterTheServerRestarts() throws {
        let server = try PostgresServer.dedicated()
        defer {
            server.stop()
            server.remove()
        }
        let store = try PostgresStateStore(connection: try server.createDatabase())
        try makeRun(store, "before")
        server.stop()
        #expect(throws: (any Error).self) { try store.run("before") }
        try server.start()
        // The broken connections were dropped; new ones are made as needed.
        var answered = false
        for _ in 0..<20 where !answered {
            answered = (try? store.run("before")) != nil
            if !answered { Thread.sleep(forTimeInterval: 0.2) }
        }
        #expect(answered)
        try makeRun(store, "after")
        #expect(Set(try store.listRuns(RunFilter()).map(\.id)) == ["before", "after"])
    }

    /// TLS to the database is libpq's: `sslmode=verify-full` with the right root certificate
    /// connects, with another CA it is refused, and `sslmode=require` encrypts without checking.
    @Test func tlsToTheDatabaseWorksAsLibpqsDoes() throws {
        let server = try PostgresServer.dedicated()
        defer {
            server.stop()
            server.remove()
        }
        let dir = TemporaryDirectory("pg-tls")
        func openssl(_ arguments: [String]) throws {
            let result = try ChildProcess.run(URL(fileURLWithPath: "/usr/bin/openssl"), arguments)
            #expect(result.status == 0, "openssl \(arguments.first ?? ""): \(result.stderr)")
        }
        let ca = dir.file("ca").path, other = dir.file("other").path, cert = dir.file("server").path
        try openssl(["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=orchestrate test CA",
                     "-keyout", ca + ".key", "-out", ca + ".crt"])
        try openssl(["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=another CA",
                     "-keyout", other + ".key", "-out", other + ".crt"])
        try openssl(["req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=127.0.0.1", "-keyout", cert + ".key", "-out", cert + ".csr"])
        _ = dir.write("san.ext", "subjectAltName = IP:127.0.0.1\n")
        try openssl(["x509", "-req", "-in", cert + ".csr", "-CA", ca + ".crt", "-CAkey", ca + ".key", "-CAcreateserial",
                     "-days", "2", "-extfile", dir.file("san.ext").path, "-out", cert + ".crt"])
        // The server's key and certificate, owned by the server's user, and TLS switched on.
        let data = server.directory + "/data"
        for name in ["server.crt", "server.key"] {
            try? FileManager.default.removeItem(atPath: data + "/" + name)
            try FileManager.default.copyItem(atPath: dir.file(name).path, toPath: data + "/" + name)
            chmod(data + "/" + name, 0o600)
            if getuid() == 0 { _ = try ChildProcess.run(URL(fileURLWithPath: "/bin/chown"), ["postgres:postgres", data + "/" + name]) }
        }
        let conf = try FileHandle(forWritingTo: URL(fileURLWithPath: data + "/postgresql.conf"))
        try conf.seekToEnd()
        try conf.write(contentsOf: Data("ssl = on\nssl_cert_file = 'server.crt'\nssl_key_file = 'server.key'\n".utf8))
        try conf.close()
        server.stop()
        try server.start()
        let database = String(try server.createDatabase().split(separator: "/").last!)
        let base = "postgresql://postgres@127.0.0.1:\(server.port)/\(database)"
        let verified = try PostgresStateStore(connection: base + "?sslmode=verify-full&sslrootcert=\(ca).crt")
        #expect(try verified.listRuns(RunFilter()).isEmpty)
        #expect(try server.sql("SELECT count(*) FROM pg_stat_ssl WHERE ssl", database: database) != "0")
        do {
            _ = try PostgresStateStore(connection: base + "?sslmode=verify-full&sslrootcert=\(other).crt")
            Issue.record("a server certificate from another CA was accepted")
        } catch {
            #expect("\(error)".contains("certificate"), "\(error)")
        }
        _ = try PostgresStateStore(connection: base + "?sslmode=require")
    }
}
