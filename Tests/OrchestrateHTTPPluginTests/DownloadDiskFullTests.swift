import Foundation
import OrchestrateJSON
import OrchestrateTestSupport
import Testing

/// http.download onto a real full disk (a 2 MiB tmpfs; mounting needs root, as CI runs): the step
/// fails with a clear no-space error after its attempts, the previous version of the destination
/// is left untouched (the new bytes only ever went to the partial), and once the disk is bigger
/// the same workflow run again completes byte-identical with nothing else left on the disk.
@Suite(.serialized) struct DownloadDiskFullTests {
    let runner = Runner(environment: ["VIMEO_TOKEN": Sandbox.token])

    @Test func aDownloadOntoAFullDiskFailsClearlyAndKeepsTheOldDestination() throws {
        guard getuid() == 0 else {
            Issue.record("mounting a small tmpfs needs root: run the suite as root (CI does)")
            return
        }
        let nginx = try Nginx()
        let size = 5 << 20
        try Tools.randomFile("\(nginx.www)/big.bin", bytes: size)
        let small = try SmallDisk(runner.path("disk"), size: "2m")
        defer { small.unmount() }
        let disk = small.path
        // An older version of the destination, which a failed download must not damage.
        let destination = "\(disk)/big.bin"
        let old = Data(repeating: 0x5A, count: 300 << 10)
        try old.write(to: URL(fileURLWithPath: destination))

        let file = runner.workflow("""
            version: 1
            name: download-to-full-disk
            steps:
              get:
                uses: http.download
                retry: { max_attempts: 2, initial_interval: 10ms }
                with: { url: "\(nginx.base)/files/big.bin", destination: "\(destination)" }
            """)
        let result = try runner.run(file)
        #expect(result.status == 1, "\(result.stdout.suffix(1500))\n\(result.stderr)")
        #expect(!result.signalled)
        let failed = try #require(Runner.events(result.stdout).ofType("step.failed", step: "get").last, "\(result.stdout.suffix(1500))")
        let message = failed["data"]?["message"]?.stringValue ?? failed.jsonText
        #expect(message.lowercased().contains("space") || message.contains("ENOSPC"), "a clear no-space error: \(failed.jsonText)")
        #expect(FileManager.default.contents(atPath: destination) == old, "the previous destination was changed")

        // Space comes back: the same workflow, run again, finishes byte-identical, no partial left.
        try small.resize("16m")
        let again = try runner.run(file)
        #expect(again.status == 0, "\(again.stdout.suffix(1500))")
        #expect(try Tools.sha256(destination) == (try Tools.sha256("\(nginx.www)/big.bin")))
        let left = try FileManager.default.contentsOfDirectory(atPath: disk).filter { $0 != "big.bin" }
        #expect(left.isEmpty, "left behind: \(left)")
    }
}
