import Foundation
import OrchestrateJSON
import OrchestrateTestSupport
import Testing

/// What only `transport: openssh` does (the tests shared with libssh2 run on both transports in
/// their own suites): a ProxyJump hop through a second sshd named in an ssh_config, and the
/// inputs it refuses.
@Suite(.serialized) struct OpenSSHTransportTests {
    let h = Harness()

    /// An ssh_config naming `jump` as a host alias with everything its connection needs (ssh
    /// hands -F on to the ssh it starts for -J, not the -o options).
    func jumpConfig(_ jump: SSHDPeer, knownHosts: String) -> String {
        h.dir.write("ssh_config", """
            Host orchestrate-test-jump
              HostName 127.0.0.1
              Port \(jump.port)
              User \(jump.user)
              IdentityFile \(jump.userKey)
              IdentitiesOnly yes
              UserKnownHostsFile \(knownHosts)
              GlobalKnownHostsFile /dev/null
              StrictHostKeyChecking yes
              BatchMode yes
            """).path
    }

    func uploadThroughJump(_ target: SSHDPeer, config: String, name: String) throws -> (ProcessResult, String) {
        let source = Harness.randomFile(h.path("\(name).bin"), size: 5 << 20, seed: 31)
        let wf = h.workflow("""
            version: 1
            name: \(name)
            steps:
              connect:
                uses: sftp.connect
                retry: { max_attempts: 1 }
                with:
                  ssh_config: \(config)
                  proxy_jump: orchestrate-test-jump
                  \(target.connection(knownHosts: try target.knownHosts(), transport: .openssh))
              up:
                needs: [connect]
                uses: sftp.upload
                retry: { max_attempts: 1 }
                with:
                  session: "${{ steps.connect.outputs.session }}"
                  source: \(source)
                  destination: in/jumped.bin
                  remote_root: \(target.remoteRoot)
                  connections: 2
                  parallel_threshold_mib: 1
            outputs:
              fingerprint: "${{ steps.connect.outputs.fingerprint }}"
            """, name: "\(name).yaml")
        return (try h.orchestrate(["run", wf, "--json"]), source)
    }

    /// Through a jump host: the target's login comes from the jump sshd (which logs it in too),
    /// the ranges each take their own hop, the target's key is still checked strictly.
    @Test func aProxyJumpHopThroughASecondSSHD() throws {
        let target = try SSHDPeer()
        let jump = try SSHDPeer()
        let config = jumpConfig(jump, knownHosts: try jump.knownHosts())
        let (result, source) = try uploadThroughJump(target, config: config, name: "jumped")
        #expect(result.status == 0, "\(result.stdout)\n\(result.stderr)")
        #expect(Harness.sameBytes(source, "\(target.remoteRoot)/in/jumped.bin"))
        #expect(result.stdout.contains(try target.fingerprint()), "the target's key, not the jump's: \(result.stdout)")
        // One hop for the session, one per extra range connection: each logged in on the jump host.
        let jumpLogins = jump.log.components(separatedBy: "Accepted publickey").count - 1
        let targetLogins = target.log.components(separatedBy: "Accepted publickey").count - 1
        #expect(jumpLogins >= 2 && jumpLogins == targetLogins, "jump: \(jumpLogins) logins, target: \(targetLogins)")
        #expect(h.waitFor(15) { jump.sshClients().isEmpty && target.sshClients().isEmpty }, "no ssh left behind")
    }

    /// The jump host's key is checked too (by the ssh_config's rules): unknown, the hop is refused.
    @Test func anUnknownJumpHostIsRefused() throws {
        let target = try SSHDPeer()
        let jump = try SSHDPeer()
        let config = jumpConfig(jump, knownHosts: h.dir.write("empty_known_hosts", "").path)
        let (result, _) = try uploadThroughJump(target, config: config, name: "unknown-jump")
        #expect(result.status == 1)
        #expect(result.stdout.contains("host_key_unknown"), "\(result.stdout)")
        #expect(result.stdout.contains("[127.0.0.1]:\(jump.port)"), "names the jump host: \(result.stdout)")
        #expect(!target.log.contains("Accepted publickey"))
    }

    /// ssh never prompts here, so secrets typed at a prompt are refused up front, by name.
    @Test func aPasswordIsRefusedWithTheInputNamed() throws {
        let peer = try SSHDPeer()
        let wf = h.workflow("""
            version: 1
            name: pw
            steps:
              connect:
                uses: sftp.connect
                with:
                  password: hunter2
                  \(peer.connection(knownHosts: try peer.knownHosts(), transport: .openssh))
            """, name: "pw.yaml")
        let result = try h.orchestrate(["run", wf, "--json"])
        #expect(result.status == 1)
        #expect(result.stdout.contains("transport: openssh takes no password or passphrase"), "\(result.stdout)")
        #expect(!peer.log.contains("Accepted"), "no connection was tried")
    }
}
