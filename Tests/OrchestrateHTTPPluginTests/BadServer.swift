import Foundation
import OrchestrateJSON
import OrchestrateTestSupport

/// tools/badserver.py: a scripted HTTP server that lies (wrong Content-Range, endless headers, a
/// huge JSON body, tus offsets that jump) and an echo endpoint, on a free port.
final class BadServer: @unchecked Sendable {
    let process = Process()
    let url: String

    init() throws {
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", TestPaths.packageRoot.appendingPathComponent("tools/badserver.py").path]
        let out = Pipe()
        process.standardOutput = out
        process.standardError = FileHandle(forWritingAtPath: "/dev/null")
        try process.run()
        var line = [UInt8]()
        var byte: UInt8 = 0
        while read(out.fileHandleForReading.fileDescriptor, &byte, 1) == 1, byte != UInt8(ascii: "\n") { line.append(byte) }
        let text = String(decoding: line, as: UTF8.self)
        guard let range = text.range(of: "http://") else { throw TestFailure("badserver did not start: \(text)") }
        url = String(text[range.lowerBound...])
    }

    deinit {
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }

    /// Bytes the server sent per path.
    func sent(_ path: String) throws -> Int64 { try Tools.json("\(url)/_stats")[path]?.intValue ?? 0 }

    func json(_ path: String) throws -> JSONValue { try Tools.json("\(url)\(path)") }
}
