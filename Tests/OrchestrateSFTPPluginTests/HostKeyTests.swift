import Foundation
import OrchestrateJSON
import OrchestrateTestSupport
import Testing

/// sftp.connect against a real sshd: the known_hosts policies (strict, accept-new, off), hashed
/// entries, the fingerprint in the refusal, a changed key refused under every policy but off.
@Suite(.serialized) struct HostKeyTests {
    let peer: SSHDPeer
    let h = Harness()

    init() throws { peer = try SSHDPeer() }

    func connect(knownHosts: String, policy: String, transport: SSHTransportKind, keyFile: String? = nil) throws -> ProcessResult {
        var fields = peer.connection(knownHosts: knownHosts, policy: policy, transport: transport)
        if let keyFile { fields = fields.replacingOccurrences(of: "key_file: \(peer.userKey)", with: "key_file: \(keyFile)") }
        let file = h.workflow("""
            version: 1
            name: connect
            steps:
              connect:
                uses: sftp.connect
                retry: { max_attempts: 1 }
                with:
                  \(fields)
            outputs:
              fingerprint: "${{ steps.connect.outputs.fingerprint }}"
            """, name: "connect-\(UUID().uuidString.prefix(6)).yaml")
        return try h.orchestrate(["run", file, "--json"])
    }

    @Test(arguments: SSHTransportKind.allCases) func unknownKeyIsRefusedUnderStrictNamingTheFingerprint(transport: SSHTransportKind) throws {
        let empty = h.dir.write("empty_known_hosts", "").path
        let result = try connect(knownHosts: empty, policy: "strict", transport: transport)
        #expect(result.status == 1)
        let fingerprint = try peer.fingerprint()
        #expect(fingerprint.hasPrefix("SHA256:"))
        #expect(result.stdout.contains(fingerprint), "\(result.stdout)")
        #expect(result.stdout.contains("host_key_unknown"))
    }

    /// A missing known_hosts (under strict) or key_file is named as such, before any libssh2 or
    /// ssh wording (or an "unknown host" refusal) can hide it.
    @Test(arguments: SSHTransportKind.allCases) func aMissingKnownHostsOrKeyFileIsNamed(transport: SSHTransportKind) throws {
        let missingHosts = h.path("no/known_hosts")
        let hosts = try connect(knownHosts: missingHosts, policy: "strict", transport: transport)
        #expect(hosts.status != 0)
        #expect(hosts.stdout.contains("known_hosts \(missingHosts) does not exist"), "\(hosts.stdout)")
        #expect(!hosts.stdout.contains("host_key_unknown"), "\(hosts.stdout)")
        let missingKey = h.path("no/id_ed25519")
        let key = try connect(knownHosts: try peer.knownHosts(), policy: "strict", transport: transport, keyFile: missingKey)
        #expect(key.status != 0)
        #expect(key.stdout.contains("key_file \(missingKey) does not exist"), "\(key.stdout)")
    }

    @Test(arguments: SSHTransportKind.allCases) func knownKeyPlainAndHashedIsAccepted(transport: SSHTransportKind) throws {
        for hashed in [false, true] {
            let known = try peer.knownHosts(hashed: hashed)
            if hashed { #expect(try String(contentsOfFile: known, encoding: .utf8).contains("|1|")) }
            let result = try connect(knownHosts: known, policy: "strict", transport: transport)
            #expect(result.status == 0, "hashed=\(hashed): \(result.stdout)")
            #expect(result.stdout.contains(try peer.fingerprint()))
        }
    }

    @Test(arguments: SSHTransportKind.allCases) func acceptNewRecordsTheKeyThenStrictAcceptsIt(transport: SSHTransportKind) throws {
        let known = h.path("new_known_hosts")
        let first = try connect(knownHosts: known, policy: "accept-new", transport: transport)
        #expect(first.status == 0, "\(first.stdout)")
        #expect(first.stdout.contains("added [127.0.0.1]:\(peer.port)"), "the run says it recorded the key: \(first.stdout)")
        let recorded = try String(contentsOfFile: known, encoding: .utf8)
        // ssh records it as the user's ssh_config says (Debian's hashes it: HashKnownHosts yes).
        #expect(recorded.hasPrefix(transport == .libssh2 ? "[127.0.0.1]:\(peer.port) ssh-ed25519 " : ""))
        // OpenSSH itself agrees with what was recorded.
        let lookup = try ChildProcess.run(URL(fileURLWithPath: "/usr/bin/ssh-keygen"), ["-F", "[127.0.0.1]:\(peer.port)", "-f", known])
        #expect(lookup.status == 0)
        #expect(try connect(knownHosts: known, policy: "strict", transport: transport).status == 0)
    }

    @Test(arguments: SSHTransportKind.allCases) func changedKeyIsRefusedUnderEveryPolicyButOff(transport: SSHTransportKind) throws {
        for hashed in [false, true] {
            let known = try peer.knownHosts(changed: true, hashed: hashed)
            for policy in ["strict", "accept-new"] {
                let result = try connect(knownHosts: known, policy: policy, transport: transport)
                #expect(result.status == 1, "\(policy): \(result.stdout)")
                #expect(result.stdout.contains("host_key_changed"), "\(policy): \(result.stdout)")
            }
            // accept-new must not have replaced the recorded key.
            #expect(try String(contentsOfFile: known, encoding: .utf8).components(separatedBy: "\n").filter { !$0.isEmpty && !$0.hasPrefix("#") }.count == 1)
            let off = try connect(knownHosts: known, policy: "off", transport: transport)
            #expect(off.status == 0)
            #expect(off.stdout.contains("host key checking is off"), "turning the check off warns in the run: \(off.stdout)")
        }
    }
}
