import Foundation
import OrchestrateTestSupport
import Testing

/// An attempt cut off in the middle of a transfer (here: a step timeout) abandons its requests
/// on the session's shared connection. The connection stays usable for everyone: requests not
/// yet sent are dropped, replies to the abandoned ones are discarded by request id, so the next
/// attempt goes on over the same login and resumes the partial. (With libssh2's own SFTP layer,
/// which keeps one pending state per operation kind, such a connection had to be thrown away.)
@Suite(.serialized) struct AbandonedConnectionTests {
    let peer: SSHDPeer
    let h = Harness()

    init() throws { peer = try SSHDPeer() }

    @Test func aTimedOutAttemptLeavesTheSharedConnectionUsable() throws {
        let known = try peer.knownHosts()
        // 4 MiB at 1 MiB/s: each 2 s attempt ends mid-file (even on a loaded machine), the third
        // or fourth finishes it, each resuming from the partial.
        let source = Harness.randomFile(h.path("slow.bin"), size: 4 << 20, seed: 21)
        let wf = h.workflow("""
            version: 1
            name: abandoned
            steps:
              connect:
                uses: sftp.connect
                with:
                  \(peer.connection(knownHosts: known))
              up:
                needs: [connect]
                uses: sftp.upload
                timeout: 2s
                retry: { max_attempts: 5, initial_interval: 100ms, backoff: 1.0 }
                with:
                  session: "${{ steps.connect.outputs.session }}"
                  source: \(source)
                  destination: slow.bin
                  remote_root: \(peer.remoteRoot)
                  connections: 1
                  chunk_kib: 64
                  max_rate: 1M
            """)
        let result = try h.orchestrate(["run", wf, "--json"])
        #expect(result.status == 0, "\(result.stdout.suffix(3000))\n\(result.stderr)")
        #expect(Harness.sameBytes(source, "\(peer.remoteRoot)/slow.bin"))
        let attempts = Harness.events(result).ofType("step.started").filter { $0["data"]?["step"]?.stringValue == "up" || $0["step"]?.stringValue == "up" }
        let log = (try? String(contentsOfFile: peer.dir.file("sshd.log").path, encoding: .utf8)) ?? ""
        let logins = log.components(separatedBy: "Accepted publickey").count - 1
        // The first attempt was cut mid-file, a later one resumed its partial, all over the one
        // login sftp.connect made.
        #expect(attempts.count >= 2, "\(result.stdout.suffix(3000))")
        #expect(result.stdout.contains("resuming"), "\(result.stdout.suffix(3000))")
        #expect(logins == 1, "\(logins) logins for \(attempts.count) attempts:\n\(log)\n\(result.stdout.suffix(3000))")
    }
}
