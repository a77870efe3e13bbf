import Foundation
import OrchestrateJSON
import OrchestrateTestSupport
import Testing

/// SFTP through tools/faultproxy.py: a tree upload and download to a real sshd while the proxy
/// drops, resets and stalls connections at seeded random offsets. Every file must arrive
/// byte-identical or the step must fail with a clear error after its attempts; never hang
/// (io_timeout ends a stall), never leave a torn destination (partials stay `.partial`).
@Suite(.serialized) struct SFTPFaultCampaignTests {
    let peer: SSHDPeer
    let h = Harness()

    init() throws { peer = try SSHDPeer() }

    /// known_hosts naming the server at the proxy's port (the key is the sshd's own).
    func knownHosts(port: Int) throws -> String {
        let fields = try String(contentsOfFile: peer.hostKeyPub, encoding: .utf8).split(separator: " ")
        return h.dir.write("known_hosts-proxy", "[127.0.0.1]:\(port) \(fields[0]) \(fields[1])\n").path
    }

    func workflow(_ uses: String, source: String, destination: String, port: Int, known: String) -> String {
        h.workflow("""
            version: 1
            name: sftp-faults
            steps:
              move:
                uses: \(uses)
                timeout: 5m
                retry: { max_attempts: 30, initial_interval: 100ms, backoff: 1.5, max_interval: 1s }
                with:
                  source: \(source)
                  destination: \(destination)
                  remote_root: \(peer.remoteRoot)
                  host: 127.0.0.1
                  port: \(port)
                  user: \(peer.user)
                  key_file: \(peer.userKey)
                  known_hosts: \(known)
                  connect_timeout: 5
                  io_timeout: 3
                  connections: 2
                  parallel_threshold_mib: 4
                  chunk_kib: 256
            """, name: "\(uses).yaml")
    }

    @Test func aTreeGoesUpAndComesBackByteIdenticalThroughDropsResetsAndStalls() throws {
        let tree = h.path("tree")
        for i in 0 ..< 12 { Harness.randomFile("\(tree)/d\(i % 3)/f\(i).bin", size: 200_000 + i * 90_001, seed: UInt64(i + 40)) }
        Harness.randomFile("\(tree)/big.bin", size: 12 << 20, seed: 77)
        // Seeded: the same faults at the same offsets on every run of the suite.
        let faults = FaultProxy.Direction(drop: 0.25, reset: 0.25, stall: 0.15, stallMilliseconds: 60_000,
                                          after: (64 << 10)...(3 << 20), repeats: false)
        let proxy = try FaultProxy(target: "127.0.0.1:\(peer.port)", seed: 4242, up: faults, down: faults, maxFaults: 40)
        defer { proxy.stop() }
        let known = try knownHosts(port: proxy.port)

        let started = Date()
        let up = try h.orchestrate(["run", workflow("sftp.upload", source: tree, destination: "in/tree", port: proxy.port, known: known), "--json"])
        #expect(up.status == 0, "\(up.stdout.suffix(3000))\n\(up.stderr)")
        let down = try h.orchestrate(["run", workflow("sftp.download", source: "in/tree", destination: h.path("back"), port: proxy.port, known: known), "--json"])
        #expect(down.status == 0, "\(down.stdout.suffix(3000))\n\(down.stderr)")
        #expect(Date().timeIntervalSince(started) < 240, "stalls are ended by io_timeout, not waited out")

        let diff = try ChildProcess.run(URL(fileURLWithPath: "/usr/bin/diff"), ["-r", tree, h.path("back")])
        #expect(diff.status == 0, "byte-identical both ways: \(diff.stdout)")
        let leftovers = try ChildProcess.run(URL(fileURLWithPath: "/usr/bin/find"), [peer.remoteRoot, h.path("back"), "-name", "*.partial"])
        #expect(leftovers.stdout.isEmpty, "no partial left: \(leftovers.stdout)")
        let stats = try proxy.stats()
        #expect(stats.faults >= 3, "the campaign injected faults: \(stats)")
        let retries = Harness.events(up).ofType("step.retrying").count + Harness.events(down).ofType("step.retrying").count
        #expect(retries >= 1, "the faults were seen and retried")
        print("sftp fault campaign: \(stats); \(retries) retries")
    }

    @Test func aServerThatNeverAnswersFailsClearlyAfterItsAttempts() throws {
        // Every connection stalls after its first bytes: the step must give up, not hang.
        let stall = FaultProxy.Direction(stall: 1, stallMilliseconds: -1, after: 0...64)
        let proxy = try FaultProxy(target: "127.0.0.1:\(peer.port)", seed: 7, down: stall)
        defer { proxy.stop() }
        let source = Harness.randomFile(h.path("one.bin"), size: 100_000, seed: 3)
        let wf = h.workflow("""
            version: 1
            name: sftp-black-hole
            steps:
              move:
                uses: sftp.upload
                retry: { max_attempts: 2, initial_interval: 100ms }
                with:
                  source: \(source)
                  destination: in/one.bin
                  remote_root: \(peer.remoteRoot)
                  host: 127.0.0.1
                  port: \(proxy.port)
                  user: \(peer.user)
                  key_file: \(peer.userKey)
                  known_hosts: \(try knownHosts(port: proxy.port))
                  connect_timeout: 2
                  io_timeout: 2
            """, name: "black-hole.yaml")
        let started = Date()
        let result = try h.orchestrate(["run", wf, "--json"])
        #expect(result.status == 1)
        #expect(Date().timeIntervalSince(started) < 60, "gave up after its attempts")
        let failed = Harness.events(result).ofType("step.failed").first
        #expect(failed?["data"]?["error"]?.stringValue?.isEmpty == false, "a clear error: \(result.stdout.suffix(2000))")
        #expect(!FileManager.default.fileExists(atPath: "\(peer.remoteRoot)/in/one.bin"))
    }
}
