import Foundation
import OrchestrateTestSupport
import Testing

/// The fault proxy itself (tools/faultproxy.py), in front of nginx and driven by curl: faults land
/// where the seed says, the same seed gives the same plan, a clean proxy is transparent, and the
/// throttle holds its rate.
@Suite(.serialized) struct FaultProxyTests {
    let nginx: Nginx
    let size = 8 << 20

    init() throws {
        nginx = try Nginx()
        try Tools.randomFile("\(nginx.www)/f.bin", bytes: size)
    }

    /// curl through `proxy` a few times; returns the downloaded sizes.
    func fetch(_ proxy: FaultProxy, times: Int) throws -> [Int] {
        let out = nginx.dir.file("out.bin").path
        return try (0..<times).map { _ in
            try? FileManager.default.removeItem(atPath: out)
            _ = try Tools.run(["curl", "-s", "--noproxy", "*", "--max-time", "20", "-o", out, "http://\(proxy.address)/files/f.bin"])
            return Tools.size(out)
        }
    }

    @Test func theSameSeedInjectsTheSameFaultsAtTheSameOffsets() throws {
        let down = FaultProxy.Direction(drop: 0.5, stall: 0.2, stallMilliseconds: 10, after: 1000...(size - 1))
        let first = try FaultProxy(target: "127.0.0.1:\(nginx.port)", seed: 42, down: down)
        let second = try FaultProxy(target: "127.0.0.1:\(nginx.port)", seed: 42, down: down)
        let other = try FaultProxy(target: "127.0.0.1:\(nginx.port)", seed: 43, down: down)
        let sizes = try fetch(first, times: 8)
        _ = try fetch(second, times: 8)
        _ = try fetch(other, times: 8)
        let a = try first.stats(), b = try second.stats(), c = try other.stats()
        #expect(a.faults > 0, "\(a)")
        #expect(a.faults == a.drops + a.stalls)
        let plan = { (s: FaultProxy.Stats) in s.events.map { "\($0.connection):\($0.kind)@\($0.offset)" } }
        #expect(plan(a) == plan(b))
        #expect(plan(a) != plan(c))
        // A drop after N bytes delivers N bytes of the body plus nginx's header, never more.
        for event in a.events where event.kind == "drop" {
            #expect(sizes[event.connection] < event.offset && sizes[event.connection] < size)
        }
        #expect(sizes.filter { $0 == size }.count == 8 - a.drops)
    }

    @Test func aResetReachesTheClientAsAConnectionReset() throws {
        let proxy = try FaultProxy(target: "127.0.0.1:\(nginx.port)", seed: 1, down: .init(reset: 1, after: 100_000...200_000))
        let result = try Tools.run(["curl", "-sS", "--noproxy", "*", "-o", "/dev/null", "http://\(proxy.address)/files/f.bin"])
        #expect(result.status == 56, "curl: \(result.status) \(result.stderr)")  // CURLE_RECV_ERROR
        #expect(try proxy.stats().resets == 1)
    }

    @Test func withoutFaultsTheProxyIsTransparentAndCountsTheBytes() throws {
        let proxy = try FaultProxy(target: "127.0.0.1:\(nginx.port)", seed: 1)
        let out = nginx.dir.file("clean.bin").path
        let result = try Tools.run(["curl", "-sS", "--noproxy", "*", "-o", out, "http://\(proxy.address)/files/f.bin"])
        #expect(result.status == 0)
        #expect(try Tools.sha256(out) == (try Tools.sha256("\(nginx.www)/f.bin")))
        let stats = try proxy.stats()
        #expect(stats.faults == 0 && stats.connections == 1)
        #expect(stats.bytesDown > size)
    }

    @Test func theThrottleHoldsItsRate() throws {
        let rate = 4 << 20
        let proxy = try FaultProxy(target: "127.0.0.1:\(nginx.port)", seed: 1, down: .init(rate: rate))
        let started = Date()
        #expect(try fetch(proxy, times: 1) == [size])
        // 8 MiB at 4 MiB/s: at least ~2 s (a lower bound only; a loaded machine is slower).
        #expect(Date().timeIntervalSince(started) >= 1.8)
        #expect(try proxy.stats().slowed == 1)
    }
}
