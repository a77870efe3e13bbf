import Foundation
import OrchestrateJSON
import OrchestrateTestSupport
import Testing

/// `orchestrate status|list|events --server URL --token-file F` against a real `serve --http`:
/// the same output as the local commands on the serve's store (read here with an empty state
/// directory of its own, so what it prints can only have come through the API), a token that is
/// refused or missing is a clear error that never shows the token, and HTTPS is verified.
@Suite(.serialized) struct RemoteCLITests {
    static let workflow = """
        version: 1
        name: remote-view
        steps:
          move: { uses: test.metered, with: { bytes: 1000000, chunk: 65536 } }
          after: { uses: test.noop, needs: [move] }
          broken: { uses: test.fail, with: { kind: permanent, message: "the server said 403" }, needs: [after] }
        """

    @Test func remoteCommandsPrintWhatLocalOnesDo() throws {
        let serve = try APIServe()
        let submitted = try serve.post("/api/runs", ["workflow_yaml": .string(Self.workflow), "labels": ["team": "media"]])
        let id = try #require(submitted.json["id"]?.stringValue, "\(submitted.body)")
        #expect(try serve.waitFor(30) { try serve.status(id) == "failed" })
        let tokenFile = serve.dir.write("token", serve.token + "\n").path
        let elsewhere = serve.dir.file("elsewhere").path  // an empty state directory
        func remote(_ arguments: [String], tokenFile: String = tokenFile) throws -> ProcessResult {
            try ChildProcess.orchestrate(arguments + ["--server", "http://127.0.0.1:\(serve.port)", "--token-file", tokenFile, "--state", elsewhere])
        }

        for arguments in [["status", id], ["status", id, "--json"], ["list"], ["list", "--json"], ["list", "--status", "failed", "--label", "team=media"],
                          ["list", "--id", String(id.prefix(4))], ["events", id], ["events", id, "--follow"]] {
            let local = try serve.orchestrate(arguments)
            let far = try remote(arguments)
            #expect(local.status == 0 && far.status == 0, "\(arguments): \(local.stderr) / \(far.stderr)")
            #expect(!far.stdout.isEmpty && far.stdout == local.stdout, "\(arguments): remote printed\n\(far.stdout)\nlocal printed\n\(local.stdout)")
        }
        // What the status shows came from the run: its failed step, its transfer, its label.
        let status = try remote(["status", id]).stdout
        #expect(status.contains("the server said 403") && status.contains("team=media") && status.contains("transfer"), "\(status)")
        #expect(try remote(["list", "--status", "running"]).stdout.isEmpty)

        // A read-only token is enough to look.
        let readerFile = serve.dir.write("reader-token", serve.readerToken).path
        #expect(try remote(["list"], tokenFile: readerFile).status == 0)

        // A wrong token: refused, said so, exit status not 0, the token not shown.
        let wrongFile = serve.dir.write("wrong-token", "not-the-token-5f3a9c").path
        let refused = try remote(["list"], tokenFile: wrongFile)
        #expect(refused.status != 0)
        #expect(refused.stderr.contains("refused the token in --token-file \(wrongFile)"), "\(refused.stderr)")
        #expect(!refused.stderr.contains("not-the-token-5f3a9c") && !refused.stdout.contains("not-the-token-5f3a9c"))
        // No token file, an unreadable one, an unknown run, a server that is not there.
        let noToken = try ChildProcess.orchestrate(["list", "--server", "http://127.0.0.1:\(serve.port)", "--state", elsewhere])
        #expect(noToken.status == 2 && noToken.stderr.contains("--token-file"), "\(noToken.stderr)")
        let unreadable = try remote(["list"], tokenFile: serve.dir.file("no-such-file").path)
        #expect(unreadable.status == 2 && unreadable.stderr.contains("cannot read --token-file"), "\(unreadable.stderr)")
        let unknown = try remote(["status", "no-such-run"])
        #expect(unknown.status == 2 && unknown.stderr.contains("no run no-such-run in http://127.0.0.1:\(serve.port)"), "\(unknown.stderr)")
        let closed = try ChildProcess.orchestrate(["list", "--server", "http://127.0.0.1:\(Ports.free())", "--token-file", tokenFile, "--state", elsewhere])
        #expect(closed.status != 0 && closed.stderr.contains("cannot reach"), "\(closed.stderr)")
    }

    @Test func httpsIsVerified() throws {
        let dir = TemporaryDirectory("remote-tls")
        let (cert, key) = try APITLSTests.selfSignedCertificate(in: dir)
        let port = Ports.free()
        let state = dir.file("s").path
        let serve = try APITLSTests.Serve(["--http", "127.0.0.1:\(port)", "--tls-cert", cert, "--tls-key", key, "--state", state], dir: dir)
        let server = "https://localhost:\(port)"
        #expect(try APITLSTests.waitForAnswer(["--cacert", cert, server + "/api/queues"]).stdout == "401", "\(serve.errors)")
        let tokenFile = state + "/http-token"

        let trusted = try ChildProcess.orchestrate(["list", "--server", server, "--token-file", tokenFile, "--cacert", cert, "--state", dir.file("e").path])
        #expect(trusted.status == 0, "\(trusted.stderr)")
        // Without the CA the certificate is not trusted: refused, with what to add.
        let untrusted = try ChildProcess.orchestrate(["list", "--server", server, "--token-file", tokenFile, "--state", dir.file("e").path])
        #expect(untrusted.status != 0 && untrusted.stderr.contains("--cacert"), "\(untrusted.stderr)")
        _ = serve
    }

    /// A server that answers without end: the CLI stops at its bound (64 MiB) with an error
    /// that says so, instead of holding the answer in memory until it aborts.
    @Test func anEndlessAnswerIsCutOff() throws {
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(listener) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, length) == 0 && getsockname(listener, $0, &length) == 0 }
        }
        #expect(bound && listen(listener, 4) == 0)
        let port = Int(UInt16(bigEndian: address.sin_port))
        let sent = Locked(0)
        Thread {
            let fd = accept(listener, nil, nil)
            guard fd >= 0 else { return }
            defer { close(fd) }
            var request = [UInt8](repeating: 0, count: 65536)
            _ = read(fd, &request, request.count)
            RawHTTP.send(fd, Array("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n{\"runs\": [".utf8))
            let chunk = [UInt8](repeating: UInt8(ascii: " "), count: 1 << 20)
            // Up to 256 MiB (the CLI must stop long before).
            for _ in 0..<256 {
                let n = chunk.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                if n <= 0 { return }
                sent.update { $0 += n }
            }
        }.start()
        let dir = TemporaryDirectory("remote-endless")
        let tokenFile = dir.write("token", "0123456789abcdef0123\n").path
        let started = Date()
        let result = try ChildProcess.orchestrate(["list", "--server", "http://127.0.0.1:\(port)", "--token-file", tokenFile,
                                                   "--state", dir.file("s").path])
        let took = Date().timeIntervalSince(started)
        #expect(result.status != 0 && result.stderr.contains("larger than 64 MiB"), "\(result.stderr)")
        #expect(took < 30, "took \(took) s")
        #expect(sent.value < 200 << 20, "the server sent \(sent.value >> 20) MiB before the CLI hung up")
    }
}
