import Foundation
import OrchestrateTestSupport
import Testing

/// An attempt cancelled in the middle of a libssh2 call (here: a step timeout) leaves that
/// connection mid-operation; the next attempt must get a fresh connection from the session,
/// never the abandoned one back from the pool (it would read the old operation's replies).
@Suite(.serialized) struct AbandonedConnectionTests {
    let peer: SSHDPeer
    let h = Harness()

    init() throws { peer = try SSHDPeer() }

    @Test func aTimedOutAttemptsConnectionIsNotReused() throws {
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
                  limit_kibps: 1024
            """)
        let result = try h.orchestrate(["run", wf, "--json"])
        #expect(result.status == 0, "\(result.stdout.suffix(3000))\n\(result.stderr)")
        #expect(Harness.sameBytes(source, "\(peer.remoteRoot)/slow.bin"))
        let attempts = Harness.events(result).ofType("step.started").filter { $0["data"]?["step"]?.stringValue == "up" || $0["step"]?.stringValue == "up" }
        let log = (try? String(contentsOfFile: peer.dir.file("sshd.log").path, encoding: .utf8)) ?? ""
        let logins = log.components(separatedBy: "Accepted publickey").count - 1
        // One login for sftp.connect, and one more for every attempt after a timed-out one.
        // The first attempt was cut mid-file: a later one resumed its partial.
        #expect(result.stdout.contains("resuming"), "\(result.stdout.suffix(3000))")
        #expect(logins >= 2, "\(logins) logins for \(attempts.count) attempts:\n\(log)\n\(result.stdout.suffix(3000))")
    }
}
