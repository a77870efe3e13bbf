// The fault-injecting TCP proxy (tools/faultproxy.py) for tests: started on a free port in front
// of a real peer (nginx, sshd, the sandbox), reconfigured and read over its control port.
import Foundation

public final class FaultProxy: @unchecked Sendable {
    /// One direction's faults; see tools/faultproxy.py for the meaning of each field.
    public struct Direction: Sendable {
        public var drop = 0.0, reset = 0.0, stall = 0.0
        public var stallMilliseconds = 2000
        public var after: ClosedRange<Int> = 0...(1 << 20)
        public var rate = 0
        public var slow = 1.0
        /// Draw again after a stall or a draw of no fault (faults keep coming on a kept-alive connection).
        public var repeats = false

        public init(drop: Double = 0, reset: Double = 0, stall: Double = 0, stallMilliseconds: Int = 2000,
                    after: ClosedRange<Int> = 0...(1 << 20), rate: Int = 0, slow: Double = 1, repeats: Bool = false)
        {
            self.drop = drop; self.reset = reset; self.stall = stall; self.stallMilliseconds = stallMilliseconds
            self.after = after; self.rate = rate; self.slow = slow; self.repeats = repeats
        }

        var json: String {
            #"{"drop":\#(drop),"reset":\#(reset),"stall":\#(stall),"stall_ms":\#(stallMilliseconds),"# +
                #""after":[\#(after.lowerBound),\#(after.upperBound)],"rate":\#(rate),"slow":\#(slow),"repeat":\#(repeats)}"#
        }
    }

    /// What the proxy injected so far.
    public struct Stats: Sendable, CustomStringConvertible {
        public var connections = 0, bytesUp = 0, bytesDown = 0
        public var faults = 0, drops = 0, resets = 0, stalls = 0, slowed = 0
        /// (connection, direction, kind, offset) of the latest injections.
        public var events: [(connection: Int, direction: String, kind: String, offset: Int)] = []

        public var description: String {
            "\(connections) connections, \(faults) faults (\(drops) drops, \(resets) resets, \(stalls) stalls), \(slowed) slowed, " +
                "\(bytesUp) bytes up, \(bytesDown) down"
        }
    }

    public let port: Int
    public let controlURL: String
    /// `127.0.0.1:PORT`, to put in URLs instead of the target's address.
    public var address: String { "127.0.0.1:\(port)" }
    private let process = Process()

    /// Starts a proxy forwarding to `target` (`HOST:PORT`) with these faults (up: client to
    /// target, down: target to client). `maxFaults` < 0 means no limit; the first
    /// `passConnections` connections are left alone.
    public init(target: String, seed: Int, up: Direction = Direction(), down: Direction = Direction(),
                maxFaults: Int = -1, passConnections: Int = 0) throws
    {
        let config = #"{"seed":\#(seed),"max_faults":\#(maxFaults),"pass_connections":\#(passConnections),"# +
            #""up":\#(up.json),"down":\#(down.json)}"#
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", TestPaths.packageRoot.appendingPathComponent("tools/faultproxy.py").path,
                             "--target", target, "--config", config]
        let out = Pipe()
        process.standardOutput = out
        process.standardError = FileHandle(forWritingAtPath: "/dev/null")
        try process.run()
        // One line: "faultproxy listening on 127.0.0.1:PORT control http://127.0.0.1:CPORT".
        var line = [UInt8]()
        let fd = out.fileHandleForReading.fileDescriptor
        var byte: UInt8 = 0
        while read(fd, &byte, 1) == 1, byte != UInt8(ascii: "\n") { line.append(byte) }
        let words = String(decoding: line, as: UTF8.self).split(separator: " ")
        guard words.count == 6, let port = Int(words[3].split(separator: ":").last ?? "") else {
            process.terminate()
            throw FaultProxyError(description: "faultproxy did not start: \(String(decoding: line, as: UTF8.self))")
        }
        self.port = port
        controlURL = String(words[5])
    }

    deinit { stop() }

    /// SIGKILL: nothing to flush, and a signal mask inherited from a test thread cannot block it.
    public func stop() {
        guard process.isRunning else { return }
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }

    /// Merges `json` (same keys as the start configuration) into the configuration; connections
    /// accepted from now on follow it.
    public func configure(_ json: String) throws { _ = try control("/config", post: json) }

    /// Stops injecting drops, resets and stalls (throttling stays as configured).
    public func calm() throws {
        try configure(#"{"up":{"drop":0,"reset":0,"stall":0},"down":{"drop":0,"reset":0,"stall":0}}"#)
    }

    public func resetStats() throws { _ = try control("/reset_stats", post: "{}") }

    public func stats() throws -> Stats {
        let object = try control("/stats", post: nil)
        func int(_ key: String) -> Int { (object[key] as? NSNumber)?.intValue ?? 0 }
        var stats = Stats(connections: int("connections"), bytesUp: int("bytes_up"), bytesDown: int("bytes_down"),
                          faults: int("faults"), drops: int("drops"), resets: int("resets"), stalls: int("stalls"),
                          slowed: int("slowed"))
        for event in object["events"] as? [[String: Any]] ?? [] {
            stats.events.append(((event["connection"] as? NSNumber)?.intValue ?? -1, event["direction"] as? String ?? "",
                                 event["kind"] as? String ?? "", (event["offset"] as? NSNumber)?.intValue ?? -1))
        }
        return stats
    }

    private func control(_ path: String, post: String?) throws -> [String: Any] {
        var args = ["curl", "-sS", "--noproxy", "*", "--max-time", "10", controlURL + path]
        if let post { args += ["-X", "POST", "--data-binary", post] }
        let result = try ChildProcess.run(URL(fileURLWithPath: "/usr/bin/env"), args)
        guard result.status == 0, let object = try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any] else {
            throw FaultProxyError(description: "faultproxy control \(path) failed: \(result.stderr)")
        }
        return object
    }
}

public struct FaultProxyError: Error, CustomStringConvertible {
    public let description: String
}
