import Foundation
import OrchestrateJSON
import OrchestrateTestSupport
import Testing

/// `if_exists` and `preserve_mtime` of sftp.upload and sftp.download against a real sshd: a
/// second transfer of an unchanged tree with `if-different` moves no file (the destination files
/// keep their inodes: every transfer goes through a partial renamed into place), modification
/// times round-trip, `skip` keeps a changed destination, `overwrite` replaces an unchanged one.
@Suite(.serialized) struct IfExistsTests {
    let peer: SSHDPeer
    let h = Harness()
    let known: String

    init() throws {
        peer = try SSHDPeer()
        known = try peer.knownHosts(hashed: true)
    }

    /// A fixed time in the past, so a fresh copy (mtime "now") is told apart.
    static let past = Date(timeIntervalSince1970: 1_600_000_000)

    func transfer(_ uses: String, source: String, destination: String, ifExists: String, transport: SSHTransportKind,
                  name: String) throws -> JSONValue
    {
        let wf = h.workflow("""
            version: 1
            name: \(name)
            steps:
              move:
                uses: \(uses)
                with:
                  source: \(source)
                  destination: \(destination)
                  remote_root: \(peer.remoteRoot)
                  if_exists: \(ifExists)
                  parallel_threshold_mib: 1
                  \(peer.connection(knownHosts: known, transport: transport))
            outputs:
              files: "${{ steps.move.outputs.files }}"
              skipped_files: "${{ steps.move.outputs.skipped_files }}"
              skipped_bytes: "${{ steps.move.outputs.skipped_bytes }}"
            """, name: "\(name).yaml")
        let earlier = Set(try h.runIDs())
        let run = try h.orchestrate(["run", wf])
        #expect(run.status == 0, "\(run.stdout)\n\(run.stderr)")
        let id = try #require(try h.runIDs().first { !earlier.contains($0) })
        return try h.status(id)["outputs"] ?? .null
    }

    static let names = ["a.bin", "d/b.bin", "d/e/c.bin", "big.bin"]

    func makeTree(_ tree: String) throws -> Int64 {
        var total: Int64 = 0
        for (i, name) in Self.names.enumerated() {
            let size = name == "big.bin" ? 3 << 20 : 1000 * (i + 1)
            Harness.randomFile("\(tree)/\(name)", size: size, seed: UInt64(i + 7))
            try FileManager.default.setAttributes([.modificationDate: Self.past.addingTimeInterval(Double(i))], ofItemAtPath: "\(tree)/\(name)")
            total += Int64(size)
        }
        return total
    }

    static func inode(_ path: String) -> UInt64 {
        ((try? FileManager.default.attributesOfItem(atPath: path))?[.systemFileNumber] as? NSNumber)?.uint64Value ?? 0
    }

    static func mtime(_ path: String) -> Int64 {
        Int64(((try? FileManager.default.attributesOfItem(atPath: path))?[.modificationDate] as? Date)?.timeIntervalSince1970.rounded(.down) ?? -1)
    }

    func inodes(_ root: String) -> [UInt64] { Self.names.map { Self.inode("\(root)/\($0)") } }

    @Test(arguments: SSHTransportKind.allCases) func aSecondUploadOfAnUnchangedTreeMovesNoFileAndTimesRoundTrip(transport: SSHTransportKind) throws {
        let tree = h.path("tree")
        let total = try makeTree(tree)
        let remote = "\(peer.remoteRoot)/in/tree"
        let first = try transfer("sftp.upload", source: tree, destination: "in/tree", ifExists: "if-different", transport: transport, name: "up1")
        #expect(first["skipped_files"]?.intValue == 0)
        for name in Self.names {
            #expect(Harness.sameBytes("\(tree)/\(name)", "\(remote)/\(name)"))
            #expect(Self.mtime("\(remote)/\(name)") == Self.mtime("\(tree)/\(name)"), "\(name): the upload keeps the modification time")
        }
        let before = inodes(remote)

        let second = try transfer("sftp.upload", source: tree, destination: "in/tree", ifExists: "if-different", transport: transport, name: "up2")
        #expect(second["skipped_files"]?.intValue == Int64(Self.names.count), "\(second.jsonText)")
        #expect(second["skipped_bytes"]?.intValue == total)
        #expect(inodes(remote) == before, "no file was sent again (each would be a new inode, renamed into place)")

        // One file changed (same size, new content and time): only it goes again.
        Harness.randomFile("\(tree)/d/b.bin", size: 2000, seed: 1234)
        let third = try transfer("sftp.upload", source: tree, destination: "in/tree", ifExists: "if-different", transport: transport, name: "up3")
        #expect(third["skipped_files"]?.intValue == Int64(Self.names.count - 1))
        #expect(Harness.sameBytes("\(tree)/d/b.bin", "\(remote)/d/b.bin"))
        #expect(Self.inode("\(remote)/a.bin") == before[0] && Self.inode("\(remote)/d/b.bin") != before[1])

        // skip: a changed source leaves the destination as it is.
        Harness.randomFile("\(tree)/a.bin", size: 1000, seed: 4321)
        let skipped = try transfer("sftp.upload", source: tree, destination: "in/tree", ifExists: "skip", transport: transport, name: "up4")
        #expect(skipped["skipped_files"]?.intValue == Int64(Self.names.count))
        #expect(!Harness.sameBytes("\(tree)/a.bin", "\(remote)/a.bin"))

        // overwrite: everything goes again, unchanged or not.
        let kept = inodes(remote)
        let all = try transfer("sftp.upload", source: tree, destination: "in/tree", ifExists: "overwrite", transport: transport, name: "up5")
        #expect(all["skipped_files"]?.intValue == 0)
        #expect(zip(inodes(remote), kept).allSatisfy { $0 != $1 })
        #expect(Harness.sameBytes("\(tree)/a.bin", "\(remote)/a.bin"))
    }

    @Test(arguments: SSHTransportKind.allCases) func downloadsKeepTimesAndSkipWhatIsThere(transport: SSHTransportKind) throws {
        let remote = "\(peer.remoteRoot)/out/tree"
        let total = try makeTree(remote)
        let back = h.path("back")
        let first = try transfer("sftp.download", source: "out/tree", destination: back, ifExists: "if-different", transport: transport, name: "down1")
        #expect(first["skipped_files"]?.intValue == 0)
        for name in Self.names {
            #expect(Harness.sameBytes("\(remote)/\(name)", "\(back)/\(name)"))
            #expect(Self.mtime("\(back)/\(name)") == Self.mtime("\(remote)/\(name)"), "\(name): the download keeps the modification time")
        }
        let before = inodes(back)
        let second = try transfer("sftp.download", source: "out/tree", destination: back, ifExists: "if-different", transport: transport, name: "down2")
        #expect(second["skipped_files"]?.intValue == Int64(Self.names.count), "\(second.jsonText)")
        #expect(second["skipped_bytes"]?.intValue == total)
        #expect(inodes(back) == before)

        // skip keeps a local file that differs; overwrite replaces every file.
        Harness.randomFile("\(back)/a.bin", size: 10, seed: 5)
        let skipped = try transfer("sftp.download", source: "out/tree", destination: back, ifExists: "skip", transport: transport, name: "down3")
        #expect(skipped["skipped_files"]?.intValue == Int64(Self.names.count))
        #expect(Harness.size("\(back)/a.bin") == 10)
        let kept = inodes(back)
        let all = try transfer("sftp.download", source: "out/tree", destination: back, ifExists: "overwrite", transport: transport, name: "down4")
        #expect(all["skipped_files"]?.intValue == 0)
        #expect(zip(inodes(back), kept).allSatisfy { $0 != $1 })
        #expect(Harness.sameBytes("\(remote)/a.bin", "\(back)/a.bin"))
    }
}

/// The local partial of an sftp.download: kept (and named by `status`) after kill -9, removed
/// once the run is cancelled, live or after the interrupt.
@Suite(.serialized) struct SFTPPartialCleanupTests {
    let peer: SSHDPeer
    let h = Harness()
    let known: String

    init() throws {
        peer = try SSHDPeer()
        known = try peer.knownHosts(hashed: true)
    }

    func start(_ destination: String) throws -> Process {
        Harness.randomFile("\(peer.remoteRoot)/big.bin", size: 16 << 20, seed: 3)
        let wf = h.workflow("""
            version: 1
            name: slow-download
            steps:
              move:
                uses: sftp.download
                with:
                  source: big.bin
                  destination: \(destination)
                  remote_root: \(peer.remoteRoot)
                  connections: 1
                  chunk_kib: 256
                  max_rate: 2M
                  \(peer.connection(knownHosts: known))
            """, name: "slow.yaml")
        return try h.start(["run", wf, "--json"])
    }

    @Test func aKilledDownloadKeepsItsPartialUntilTheRunIsCancelled() throws {
        let destination = h.path("big.bin")
        let partial = destination + ".partial"
        let process = try start(destination)
        #expect(h.waitFor { Harness.size(partial) >= 1 << 20 })
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
        let run = try #require(try h.runIDs().last)
        let step = try h.status(run)["steps"]?.arrayValue?.first { $0["id"]?.stringValue == "move" }
        #expect(step?["partial"]?.stringValue == partial, "\(step as Any)")
        #expect(FileManager.default.fileExists(atPath: partial))
        let cancelled = try h.orchestrate(["cancel", run])
        #expect(cancelled.status == 0, "\(cancelled.stdout)\n\(cancelled.stderr)")
        #expect(!FileManager.default.fileExists(atPath: partial), "the cancelled run's partial is left behind")
    }

    @Test func aDownloadCancelledWhileItRunsLeavesNoPartial() throws {
        let destination = h.path("big.bin")
        let partial = destination + ".partial"
        let process = try start(destination)
        #expect(h.waitFor { Harness.size(partial) >= 1 << 20 })
        let run = try #require(try h.runIDs().last)
        let cancelled = try h.orchestrate(["cancel", run])
        #expect(cancelled.status == 0, "\(cancelled.stdout)\n\(cancelled.stderr)")
        process.waitUntilExit()
        #expect(try h.status(run)["status"]?.stringValue == "cancelled")
        #expect(!FileManager.default.fileExists(atPath: partial), "the cancelled download's partial is left behind")
    }
}
