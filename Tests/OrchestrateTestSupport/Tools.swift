import Foundation
import OrchestrateJSON

/// Shell and file helpers every test target uses: random files, hashes, sizes, a free loopback
/// port, curl for control calls, and polling.
public enum Tools {
    public static func run(_ args: [String]) throws -> ProcessResult {
        try ChildProcess.run(URL(fileURLWithPath: "/usr/bin/env"), args)
    }

    /// `bytes` of random data, written a MiB at a time (memory stays flat for big files).
    public static func randomFile(_ path: String, bytes: Int) throws {
        _ = FileManager.default.createFile(atPath: path, contents: nil)
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: path))
        defer { try? handle.close() }
        var generator = SystemRandomNumberGenerator()
        var left = bytes
        while left > 0 {
            let n = min(left, 1 << 20)
            var chunk = [UInt8](repeating: 0, count: n)
            for i in stride(from: 0, to: n, by: 8) {
                let value = generator.next() as UInt64
                for j in 0 ..< min(8, n - i) { chunk[i + j] = UInt8(truncatingIfNeeded: value >> (8 * UInt64(j))) }
            }
            handle.write(Data(chunk))
            left -= n
        }
    }

    public static func sha256(_ path: String) throws -> String {
        String(try run(["sha256sum", path]).stdout.prefix(64))
    }

    /// The file's size, or -1 when there is none.
    public static func size(_ path: String) -> Int {
        ((try? FileManager.default.attributesOfItem(atPath: path))?[.size] as? NSNumber)?.intValue ?? -1
    }

    public static func sameBytes(_ a: String, _ b: String) -> Bool {
        guard let x = FileManager.default.contents(atPath: a), let y = FileManager.default.contents(atPath: b) else { return false }
        return x == y
    }

    /// A port that was free a moment ago (bind to 0, read it, close).
    public static func freePort() -> Int { Ports.free() }

    /// GET or POST with curl (the control surface of a scripted server), parsed as JSON.
    public static func json(_ url: String, post: String? = nil) throws -> JSONValue {
        var args = ["curl", "-sS", "--max-time", "10", url]
        if let post { args += ["-X", "POST", "--data-binary", post] }
        return try JSONValue(parsing: try run(args).stdout)
    }

    /// Polls `condition` every 20 ms until it holds or `timeout` seconds have passed.
    public static func waitFor(_ timeout: Double = 20, _ condition: () -> Bool) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if condition() { return true }
            Thread.sleep(forTimeInterval: 0.02)
        }
        return condition()
    }
}

/// A test's own failure, with what went wrong.
public struct TestFailure: Error, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}
