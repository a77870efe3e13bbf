import Foundation
import OrchestrateJSON
import OrchestrateTestSupport
import Testing

/// http.download against a real nginx: `Last-Modified` becomes the file's modification time;
/// `if_exists` (if-different asks a HEAD and compares Content-Length and Last-Modified, skip asks
/// nothing, overwrite downloads again); partial files are removed once nothing can resume them
/// (a 404, a cancelled run) and kept, and shown by `status`, while something can (kill -9).
@Suite(.serialized) struct DownloadIfExistsTests {
    let runner = Runner(environment: ["VIMEO_TOKEN": Sandbox.token])

    static let past = Date(timeIntervalSince1970: 1_600_000_000)

    func workflow(_ url: String, _ destination: String, ifExists: String = "overwrite", maxRate: Int = 0, name: String) -> String {
        runner.workflow("""
            version: 1
            name: \(name)
            steps:
              download:
                uses: http.download
                retry: { max_attempts: 3, initial_interval: 100ms }
                with:
                  url: \(url)
                  destination: \(destination)
                  if_exists: \(ifExists)
                  max_rate: \(maxRate)
            outputs:
              skipped: "${{ steps.download.outputs.skipped }}"
              size: "${{ steps.download.outputs.size }}"
            """, name: "\(name).yaml")
    }

    static func inode(_ path: String) -> UInt64 {
        ((try? FileManager.default.attributesOfItem(atPath: path))?[.systemFileNumber] as? NSNumber)?.uint64Value ?? 0
    }

    static func mtime(_ path: String) -> Date? { (try? FileManager.default.attributesOfItem(atPath: path))?[.modificationDate] as? Date }

    func requests(_ nginx: Nginx, _ method: String) -> Int { nginx.accessLog.filter { $0.hasPrefix("\(method) /files/") }.count }

    @Test func lastModifiedBecomesTheModificationTimeAndIfDifferentDownloadsAnUnchangedFileOnce() throws {
        let nginx = try Nginx()
        let served = "\(nginx.www)/data.bin"
        try Tools.randomFile(served, bytes: 300_000)
        try FileManager.default.setAttributes([.modificationDate: Self.past], ofItemAtPath: served)
        let destination = runner.path("data.bin")
        let wf = workflow("\(nginx.base)/files/data.bin", destination, ifExists: "if-different", name: "ifdiff")

        let first = try runner.run(wf)
        #expect(first.status == 0, "\(first.stderr)")
        #expect(Self.mtime(destination) == Self.past, "Last-Modified is the file's time (curl -R)")
        #expect(Runner.events(first.stdout).runOutputs?["skipped"]?.boolValue == false)
        let inode = Self.inode(destination)

        let second = try runner.run(wf)
        #expect(second.status == 0, "\(second.stderr)")
        #expect(Runner.events(second.stdout).runOutputs?["skipped"]?.boolValue == true)
        #expect(Runner.events(second.stdout).runOutputs?["size"]?.intValue == 300_000)
        #expect(requests(nginx, "GET") == 1 && requests(nginx, "HEAD") == 1, "\(nginx.accessLog)")
        #expect(Self.inode(destination) == inode)

        // A newer file on the server (same size): downloaded again.
        try Tools.randomFile(served, bytes: 300_000)
        let third = try runner.run(wf)
        #expect(third.status == 0, "\(third.stderr)")
        #expect(requests(nginx, "GET") == 2, "\(nginx.accessLog)")
        #expect(try Tools.sha256(destination) == Tools.sha256(served))
    }

    @Test func skipAsksNothingAndOverwriteDownloadsAgain() throws {
        let nginx = try Nginx()
        try Tools.randomFile("\(nginx.www)/data.bin", bytes: 100_000)
        let destination = runner.path("data.bin")
        try Data("old".utf8).write(to: URL(fileURLWithPath: destination))
        let skip = try runner.run(workflow("\(nginx.base)/files/data.bin", destination, ifExists: "skip", name: "skip"))
        #expect(skip.status == 0, "\(skip.stderr)")
        #expect(Runner.events(skip.stdout).runOutputs?["skipped"]?.boolValue == true)
        #expect(try String(contentsOfFile: destination, encoding: .utf8) == "old")
        #expect(nginx.accessLog.isEmpty || requests(nginx, "GET") + requests(nginx, "HEAD") == 0, "\(nginx.accessLog)")

        let overwrite = try runner.run(workflow("\(nginx.base)/files/data.bin", destination, ifExists: "overwrite", name: "overwrite"))
        #expect(overwrite.status == 0, "\(overwrite.stderr)")
        #expect(try Tools.sha256(destination) == Tools.sha256("\(nginx.www)/data.bin"))
        let again = try runner.run(workflow("\(nginx.base)/files/data.bin", destination, ifExists: "overwrite", name: "overwrite"))
        #expect(again.status == 0)
        #expect(requests(nginx, "GET") == 2, "an unchanged file is downloaded again with overwrite")
    }

    @Test func aPermanentlyFailedDownloadLeavesNoPartial() throws {
        let nginx = try Nginx()
        let destination = runner.path("missing.bin")
        let result = try runner.run(workflow("\(nginx.base)/files/missing.bin", destination, name: "missing"))
        #expect(result.status == 1)
        #expect(Runner.events(result.stdout).ofType("step.failed", step: "download").last?["data"]?["code"]?.stringValue == "http_404")
        #expect(!FileManager.default.fileExists(atPath: runner.path(".missing.bin.part")))
        #expect(!FileManager.default.fileExists(atPath: destination))
    }

    /// kill -9 keeps the partial and `status` says where it is; `cancel` of that run then
    /// removes it (nothing can resume a cancelled run).
    @Test func anInterruptedDownloadKeepsItsPartialUntilTheRunIsCancelled() throws {
        let nginx = try Nginx()
        let size = 8 << 20
        try Tools.randomFile("\(nginx.www)/big.bin", bytes: size)
        let destination = runner.path("big.bin")
        let part = runner.path(".big.bin.part")
        let process = try runner.start(workflow("\(nginx.base)/files/big.bin", destination, maxRate: size / 8, name: "killed"))
        #expect(Tools.waitFor(30) { Tools.size(part) >= size / 8 })
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
        let run = try #require(try runner.runIDs().last)
        #expect(FileManager.default.fileExists(atPath: part))
        let step = try runner.status(run)["steps"]?.arrayValue?.first { $0["id"]?.stringValue == "download" }
        #expect(step?["partial"]?.stringValue == part, "\(step as Any)")
        let text = try runner.orchestrate(["status", run])
        #expect(text.stdout.contains("partial file \(part)"), "\(text.stdout)")

        let cancelled = try runner.orchestrate(["cancel", run])
        #expect(cancelled.status == 0, "\(cancelled.stdout)\n\(cancelled.stderr)")
        #expect(!FileManager.default.fileExists(atPath: part), "the cancelled run's partial is left behind")
        #expect(!FileManager.default.fileExists(atPath: destination))
    }

    /// A download the run's `cancel` stops while it runs leaves no partial.
    @Test func aCancelledDownloadLeavesNoPartial() throws {
        let nginx = try Nginx()
        let size = 8 << 20
        try Tools.randomFile("\(nginx.www)/big.bin", bytes: size)
        let part = runner.path(".big.bin.part")
        let process = try runner.start(workflow("\(nginx.base)/files/big.bin", runner.path("big.bin"), maxRate: size / 8, name: "cancelled"))
        #expect(Tools.waitFor(30) { Tools.size(part) >= size / 8 })
        let run = try #require(try runner.runIDs().last)
        let cancel = try runner.orchestrate(["cancel", run])
        #expect(cancel.status == 0, "\(cancel.stdout)\n\(cancel.stderr)")
        process.waitUntilExit()
        #expect(try runner.status(run)["status"]?.stringValue == "cancelled")
        #expect(!FileManager.default.fileExists(atPath: part), "the cancelled download's partial is left behind")
    }
}
