import Foundation
import OrchestrateJSON
import OrchestrateTestSupport
import Testing

/// ftp.upload and ftp.download against Debian's vsftpd (explicit and implicit FTPS, no MLSD: its
/// folders are read from LIST), run in the foreground with the test's own configuration.
@Suite(.serialized) struct VsftpdTests {
    let runner = Runner(environment: [:])

    func workflow(_ server: Vsftpd, uses: String, with: String, tls: String = "explicit", caFile: Bool = true, name: String = "wf.yaml") -> String {
        runner.workflow("""
            version: 1
            name: vsftpd
            steps:
              move:
                uses: \(uses)
                retry: { max_attempts: 2, initial_interval: 10ms }
                with: { host: 127.0.0.1, port: \(server.port), tls: \(tls), remote_root: /pub, \
            \(caFile ? "ca_file: \"\(server.certificate.cert)\", " : "")\(with) }
            """, name: name)
    }

    @Test func aTreeGoesUpAndComesBackByteIdenticalOverExplicitTLS() throws {
        guard Vsftpd.available else {
            Issue.record("vsftpd needs root and the vsftpd package (scripts/install-deps.sh): run the suite as root (CI does)")
            return
        }
        let server = try Vsftpd()
        let tree = runner.path("tree")
        try Trees.make(tree, big: 2 << 20)
        let up = try runner.run(workflow(server, uses: "ftp.upload", with: "source: \"\(tree)\", destination: in/tree"))
        #expect(up.status == 0, "\(up.stdout)\n\(server.log.suffix(2000))")
        #expect(Trees.files(server.pub + "/in/tree") == Trees.files(tree))
        #expect(server.log.contains("\"AUTH TLS\""), "explicit TLS: AUTH TLS on the FTP port")
        #expect(server.log.contains("RNTO big.bin"), "uploaded as big.bin.partial, then renamed into place")

        let back = runner.path("back")
        let down = try runner.run(workflow(server, uses: "ftp.download", with: "source: in/tree, destination: \"\(back)\"", name: "down.yaml"))
        #expect(down.status == 0, "\(down.stdout)\n\(server.log.suffix(2000))")
        #expect(Trees.files(back) == Trees.files(tree))
        #expect(server.log.contains("\"LIST\""), "vsftpd has no MLSD: the folders were read from LIST")
    }

    @Test func implicitTLSOnAPortOfItsOwn() throws {
        guard Vsftpd.available else {
            Issue.record("vsftpd needs root and the vsftpd package (scripts/install-deps.sh): run the suite as root (CI does)")
            return
        }
        let server = try Vsftpd(implicit: true)
        let file = runner.path("f.bin")
        try Tools.randomFile(file, bytes: 300_000)
        let up = try runner.run(workflow(server, uses: "ftp.upload", with: "source: \"\(file)\", destination: f.bin", tls: "implicit"))
        #expect(up.status == 0, "\(up.stdout)\n\(server.log.suffix(2000))")
        #expect(Trees.sameBytes(file, server.pub + "/f.bin"))
        #expect(!server.log.contains("\"AUTH TLS\""), "implicit TLS: no AUTH TLS")

        let refused = try runner.run(workflow(server, uses: "ftp.upload", with: "source: \"\(file)\", destination: g.bin", tls: "implicit",
                                              caFile: false, name: "untrusted.yaml"))
        #expect(refused.status == 1)
        let failed = Runner.events(refused.stdout).ofType("step.failed", step: "move").last?["data"]
        #expect(failed?["code"]?.stringValue == "tls_verification_failed", "\(String(describing: failed))")
    }
}
