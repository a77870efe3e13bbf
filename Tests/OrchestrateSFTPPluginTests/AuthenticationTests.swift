import Foundation
import OrchestrateJSON
import OrchestrateTestSupport
import Testing

/// sftp.connect's other two ways in, against a real sshd: a password given as a secret (for a
/// system user the test creates, so it needs root) and the identities of a real ssh-agent.
/// Each also shows the refusal: a wrong password, an agent holding no accepted key.
@Suite(.serialized) struct AuthenticationTests {
    let h = Harness()

    /// A workflow that connects with `auth` (YAML lines under `with:`) and uploads one file.
    func uploadWorkflow(_ peer: SSHDPeer, user: String, auth: String, remoteRoot: String, known: String,
                        transport: SSHTransportKind = .libssh2) -> (String, String) {
        let source = Harness.randomFile(h.path("auth-\(UUID().uuidString.prefix(6)).bin"), size: 300_000, seed: 5)
        let wf = h.workflow("""
            version: 1
            name: auth
            \(auth.contains("secrets.") ? "secrets: { password: { env: SFTP_TEST_PASSWORD } }" : "")
            steps:
              connect:
                uses: sftp.connect
                retry: { max_attempts: 1 }
                with:
                  host: 127.0.0.1
                  port: \(peer.port)
                  user: \(user)
                  known_hosts: \(known)
                  transport: \(transport.rawValue)
                  \(auth)
              up:
                uses: sftp.upload
                needs: [connect]
                retry: { max_attempts: 1 }
                with:
                  session: "${{ steps.connect.outputs.session }}"
                  source: \(source)
                  destination: in/auth.bin
                  remote_root: \(remoteRoot)
            """, name: "auth-\(UUID().uuidString.prefix(6)).yaml")
        return (wf, source)
    }

    @Test func passwordFromASecretLogsIn() throws {
        guard getuid() == 0 else {
            Issue.record("password auth needs a system user with a known password: run the suite as root (CI does)")
            return
        }
        let peer = try SSHDPeer(passwordAuthentication: true)
        let user = "orchestrate-sftp-test"
        if try ChildProcess.run(URL(fileURLWithPath: "/usr/bin/id"), ["-u", user]).status != 0 {
            let added = try ChildProcess.run(URL(fileURLWithPath: "/usr/sbin/useradd"), ["--no-create-home", "--shell", "/bin/sh", user])
            #expect(added.status == 0, "useradd: \(added.stderr)")
        }
        let password = "pw-\(UUID().uuidString)"
        let set = try ChildProcess.run(URL(fileURLWithPath: "/bin/sh"), ["-c", "echo '\(user):\(password)' | /usr/sbin/chpasswd"])
        #expect(set.status == 0, "chpasswd: \(set.stderr)")
        // A remote root the test user can write (the peer's own directory is private to root).
        let remoteRoot = "/tmp/orchestrate-sftp-pw-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: remoteRoot, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o755])
        defer { try? FileManager.default.removeItem(atPath: remoteRoot) }
        _ = try ChildProcess.run(URL(fileURLWithPath: "/bin/chown"), [user, remoteRoot])
        let known = try peer.knownHosts()
        let (wf, source) = uploadWorkflow(peer, user: user, auth: "password: \"${{ secrets.password }}\"", remoteRoot: remoteRoot, known: known)

        let ok = try ChildProcess.orchestrate(["run", wf, "--json", "--state", h.state], environment: ["SFTP_TEST_PASSWORD": password])
        #expect(ok.status == 0, "\(ok.stdout)\n\(ok.stderr)")
        #expect(Harness.sameBytes(source, "\(remoteRoot)/in/auth.bin"))
        #expect(!ok.stdout.contains(password) && !ok.stderr.contains(password), "the password never shows")

        let wrong = try ChildProcess.orchestrate(["run", wf, "--json", "--state", h.state], environment: ["SFTP_TEST_PASSWORD": "not-it"])
        #expect(wrong.status == 1)
        #expect(wrong.stdout.contains("auth_failed"), "\(wrong.stdout)")
        #expect(wrong.stdout.contains("authentication as \(user) failed"), "\(wrong.stdout)")
    }

    @Test(arguments: SSHTransportKind.allCases) func anAgentsIdentityLogsIn(transport: SSHTransportKind) throws {
        let peer = try SSHDPeer()
        let socket = h.path("agent.sock")
        let agent = Process()
        agent.executableURL = URL(fileURLWithPath: "/usr/bin/ssh-agent")
        agent.arguments = ["-D", "-a", socket]
        agent.standardOutput = FileHandle.nullDevice
        agent.standardError = FileHandle.nullDevice
        try agent.run()
        defer {
            kill(agent.processIdentifier, SIGKILL)  // SIGTERM may be blocked in children of test threads
            agent.waitUntilExit()
        }
        #expect(h.waitFor(10) { FileManager.default.fileExists(atPath: socket) })
        let known = try peer.knownHosts()
        let (wf, source) = uploadWorkflow(peer, user: peer.user, auth: "agent: true", remoteRoot: peer.remoteRoot, known: known, transport: transport)

        // An agent without the user's key: refused, with the reason.
        let empty = try ChildProcess.orchestrate(["run", wf, "--json", "--state", h.state], environment: ["SSH_AUTH_SOCK": socket])
        #expect(empty.status == 1)
        #expect(empty.stdout.contains(transport == .libssh2 ? "no identity in ssh-agent was accepted" : "Permission denied (publickey"),
                "\(empty.stdout)")
        #expect(empty.stdout.contains("auth_failed"), "\(empty.stdout)")

        var env = ProcessInfo.processInfo.environment
        env["SSH_AUTH_SOCK"] = socket
        let added = try ChildProcess.run(URL(fileURLWithPath: "/usr/bin/ssh-add"), [peer.userKey], environment: env)
        #expect(added.status == 0, "ssh-add: \(added.stderr)")
        let ok = try ChildProcess.orchestrate(["run", wf, "--json", "--state", h.state], environment: ["SSH_AUTH_SOCK": socket])
        #expect(ok.status == 0, "\(ok.stdout)\n\(ok.stderr)")
        #expect(Harness.sameBytes(source, "\(peer.remoteRoot)/in/auth.bin"))
    }
}
