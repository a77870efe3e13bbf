import Foundation
import OrchestrateJSON
import OrchestrateTestSupport
import Testing

/// `orchestrate copy` from plain-HTTP nginx URLs (http.download).
@Suite(.serialized) struct HTTPCopyTests {
    @Test func anHTTPURLIsDownloadedByteIdentical() throws {
        let nginx = try Nginx()
        let runner = Runner()
        try Tools.randomFile("\(nginx.www)/movie.bin", bytes: 3 << 20)
        try FileManager.default.createDirectory(atPath: runner.path("in"), withIntermediateDirectories: true)
        let down = try runner.orchestrate(["copy", "\(nginx.base)/files/movie.bin", runner.path("in"), "--max-rate", "20M"])
        #expect(down.status == 0, "\(down.stdout)\n\(down.stderr)")
        #expect(try Tools.sha256(runner.path("in/movie.bin")) == Tools.sha256("\(nginx.www)/movie.bin"))
        let run = try #require(try runner.runIDs().last)
        #expect(try runner.status(run)["workflow"]?.stringValue == "copy")
    }

    /// A DST that names a file takes the bytes whatever the URL's path ends with; only a folder
    /// DST needs a name from the URL.
    @Test func aURLThatNamesNoFileGoesToTheFileDSTNames() throws {
        let nginx = try Nginx()
        let runner = Runner()
        let down = try runner.orchestrate(["copy", "\(nginx.base)/", runner.path("root.txt")])
        #expect(down.status == 0, "\(down.stdout)\n\(down.stderr)")
        #expect(FileManager.default.contents(atPath: runner.path("root.txt")) == Data("the root".utf8))
        try FileManager.default.createDirectory(atPath: runner.path("in"), withIntermediateDirectories: true)
        let intoFolder = try runner.orchestrate(["copy", "\(nginx.base)/", runner.path("in")])
        #expect(intoFolder.status == 2 && intoFolder.stderr.contains("names no file"), "\(intoFolder.stderr)")
    }
}
