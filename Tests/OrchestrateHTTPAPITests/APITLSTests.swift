import Foundation
import OrchestrateTestSupport
import Testing

/// `serve --http` on an address other machines can reach: refused without TLS, HTTPS with
/// `--tls-cert/--tls-key` (a self-signed certificate made here with openssl, trusted by curl
/// through `--cacert`), plain HTTP only with `--http-plaintext`.
@Suite(.serialized) struct APITLSTests {
    /// A `serve` in the background; stopped when released.
    final class Serve {
        let process = Process()
        let stderr: URL

        init(_ arguments: [String], dir: TemporaryDirectory) throws {
            stderr = dir.write("serve-\(UUID().uuidString).err", "")
            process.executableURL = TestPaths.orchestrate
            process.arguments = ["serve"] + arguments
            process.standardOutput = FileHandle(forWritingAtPath: "/dev/null")
            process.standardError = try FileHandle(forWritingTo: stderr)
            try process.run()
        }

        var errors: String { (try? String(contentsOf: stderr, encoding: .utf8)) ?? "" }

        deinit {
            process.terminate()
            process.waitUntilExit()
        }
    }

    static func curl(_ arguments: [String]) throws -> ProcessResult {
        try ChildProcess.run(URL(fileURLWithPath: "/usr/bin/curl"),
                             ["--silent", "--show-error", "--max-time", "5", "--output", "/dev/null", "--write-out", "%{http_code}"] + arguments)
    }

    /// Polls until curl gets any HTTP answer (or 20 s pass).
    static func waitForAnswer(_ arguments: [String]) throws -> ProcessResult {
        let deadline = Date().addingTimeInterval(20)
        var last = try curl(arguments)
        while last.stdout == "000" && Date() < deadline {
            Thread.sleep(forTimeInterval: 0.1)
            last = try curl(arguments)
        }
        return last
    }

    /// A self-signed certificate for localhost and 127.0.0.1, made with openssl in `dir`.
    static func selfSignedCertificate(in dir: TemporaryDirectory) throws -> (cert: String, key: String) {
        let cert = dir.file("cert.pem").path, key = dir.file("key.pem").path
        let made = try ChildProcess.run(URL(fileURLWithPath: "/usr/bin/openssl"), [
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", cert, "-days", "1",
            "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"])
        guard made.status == 0 else { throw StartFailure(description: "openssl: \(made.stderr)") }
        return (cert, key)
    }

    @Test func httpsWithACertificatePlainOnlyWhenAskedFor() throws {
        let dir = TemporaryDirectory("api-tls")
        let (cert, key) = try Self.selfSignedCertificate(in: dir)

        // Without TLS: refused, and the message says what to add.
        let port = Ports.free()
        let refused = try ChildProcess.orchestrate(["serve", "--http", "0.0.0.0:\(port)", "--state", dir.file("s").path])
        #expect(refused.status == 2)
        #expect(refused.stderr.contains("--tls-cert") && refused.stderr.contains("--http-plaintext"), "\(refused.stderr)")
        // A certificate that is not one: a clear error naming the files.
        let bogus = dir.write("bogus.pem", "not a certificate\n").path
        let unreadable = try ChildProcess.orchestrate(["serve", "--http", "0.0.0.0:\(port)", "--tls-cert", bogus, "--tls-key", key,
                                                       "--state", dir.file("s").path])
        #expect(unreadable.status != 0)
        #expect(unreadable.stderr.contains("--tls-cert \(bogus)"), "\(unreadable.stderr)")

        // With a certificate: HTTPS, trusted through the CA file; the token still required.
        let serve = try Serve(["--http", "0.0.0.0:\(port)", "--tls-cert", cert, "--tls-key", key, "--state", dir.file("s").path], dir: dir)
        let url = "https://127.0.0.1:\(port)/api/queues"
        #expect(try Self.waitForAnswer(["--cacert", cert, url]).stdout == "401", "\(serve.errors)")
        let token = try String(contentsOfFile: dir.file("s/http-token").path, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(try Self.curl(["--cacert", cert, "-H", "Authorization: Bearer \(token)", url]).stdout == "200")
        #expect(try Self.curl(["--cacert", cert, "-H", "Authorization: Bearer \(token)", "https://localhost:\(port)/metrics"]).stdout == "200")
        // Not trusted without the CA; plain HTTP gets no answer from a TLS port.
        let untrusted = try Self.curl([url])
        #expect(untrusted.status == 60, "\(untrusted.stderr)")
        #expect(try Self.curl(["-H", "Authorization: Bearer \(token)", "http://127.0.0.1:\(port)/api/queues"]).stdout != "200")
        #expect(serve.errors.contains("https://0.0.0.0:\(port)"), "\(serve.errors)")
        // TLS 1.2 at least: a client offering 1.1 or 1.0 (allowed on its side) is refused.
        func handshake(_ version: String) throws -> Int32 {
            try ChildProcess.run(URL(fileURLWithPath: "/usr/bin/openssl"), ["s_client", "-connect", "127.0.0.1:\(port)", version,
                                                                           "-cipher", "DEFAULT:@SECLEVEL=0", "-brief"]).status
        }
        #expect(try handshake("-tls1_2") == 0)
        #expect(try handshake("-tls1_1") != 0)
        #expect(try handshake("-tls1") != 0)
        _ = serve

        // --http-plaintext: plain HTTP on a reachable address, when a TLS proxy stands in front.
        let plainPort = Ports.free()
        let plain = try Serve(["--http", "0.0.0.0:\(plainPort)", "--http-plaintext", "--state", dir.file("p").path], dir: dir)
        #expect(try Self.waitForAnswer(["http://127.0.0.1:\(plainPort)/api/queues"]).stdout == "401", "\(plain.errors)")
    }
}
