import Foundation
import OrchestrateTestSupport
import XCTest

/// Several "machines" on this one: a Linux bridge on the host with address 10.231.N.1/24 and, per
/// machine, a network namespace joined to it by a veth pair (10.231.N.(10+i)). PostgreSQL and the
/// sandbox listen on the host side; the namespaces reach only that /24, so no traffic leaves the
/// machine. N is picked per LAN so two test processes cannot collide. `remove()` (call it in a
/// defer) kills every process left in the namespaces and deletes them with their links.
final class VirtualLAN: @unchecked Sendable {
    struct Machine {
        let namespace: String
        /// The namespace's end of its veth pair (what a partition takes down).
        let interface: String
        let address: String
    }

    let hostAddress: String
    let network: String
    private(set) var machines: [Machine] = []
    private let tag: String
    private let subnet: Int
    private var bridge: String { "ob\(tag)" }

    /// Skips the test (XCTSkip) unless root with a working `ip netns`.
    static func requireSupport() throws {
        guard getuid() == 0 else { throw XCTSkip("the several-machines tests need root (ip netns, veth, bridge)") }
        guard FileManager.default.isExecutableFile(atPath: "/usr/sbin/ip") || FileManager.default.isExecutableFile(atPath: "/sbin/ip") else {
            throw XCTSkip("the several-machines tests need `ip` from iproute2 (scripts/install-deps.sh installs it)")
        }
        let probe = "orcprobe\(getpid())"
        let added = try ip(["netns", "add", probe])
        _ = try? ip(["netns", "del", probe])
        guard added.status == 0 else {
            throw XCTSkip("`ip netns add` does not work here (\(added.stderr.trimmingCharacters(in: .whitespacesAndNewlines)))")
        }
    }

    /// Creates the bridge and `count` machines.
    init(machines count: Int) throws {
        tag = String(format: "%05x", UInt32.random(in: 0...0xfffff))
        subnet = try VirtualLAN.unusedSubnet()
        hostAddress = "10.231.\(subnet).1"
        network = "10.231.\(subnet).0/24"
        do {
            try VirtualLAN.must(["link", "add", bridge, "type", "bridge"])
            try VirtualLAN.must(["addr", "add", "\(hostAddress)/24", "dev", bridge])
            try VirtualLAN.must(["link", "set", bridge, "up"])
            for index in 1...count { try addMachine(index) }
        } catch {
            remove()
            throw error
        }
    }

    private func addMachine(_ index: Int) throws {
        let namespace = "orc\(tag)n\(index)"
        let hostEnd = "ov\(tag)h\(index)", machineEnd = "ov\(tag)m\(index)"
        let address = "10.231.\(subnet).\(10 + index)"
        try VirtualLAN.must(["netns", "add", namespace])
        machines.append(Machine(namespace: namespace, interface: machineEnd, address: address))
        try VirtualLAN.must(["link", "add", hostEnd, "type", "veth", "peer", "name", machineEnd])
        try VirtualLAN.must(["link", "set", hostEnd, "master", bridge])
        try VirtualLAN.must(["link", "set", hostEnd, "up"])
        try VirtualLAN.must(["link", "set", machineEnd, "netns", namespace])
        try VirtualLAN.must(["-n", namespace, "addr", "add", "\(address)/24", "dev", machineEnd])
        try VirtualLAN.must(["-n", namespace, "link", "set", machineEnd, "up"])
        try VirtualLAN.must(["-n", namespace, "link", "set", "lo", "up"])
    }

    /// The command line that runs `arguments` on machine `index` (1-based).
    func command(on index: Int, _ arguments: [String]) -> [String] {
        ["/usr/sbin/ip", "netns", "exec", machines[index - 1].namespace] + arguments
    }

    /// Cuts machine `index` off the network (its link down) or heals it.
    func partition(_ index: Int) throws {
        let machine = machines[index - 1]
        try VirtualLAN.must(["-n", machine.namespace, "link", "set", machine.interface, "down"])
    }

    func heal(_ index: Int) throws {
        let machine = machines[index - 1]
        try VirtualLAN.must(["-n", machine.namespace, "link", "set", machine.interface, "up"])
    }

    /// kill -9 of every process on machine `index` (its worker and whatever that started).
    func killAll(on index: Int) {
        let pids = (try? VirtualLAN.ip(["netns", "pids", machines[index - 1].namespace]).stdout) ?? ""
        for pid in pids.split(separator: "\n").compactMap({ pid_t($0.trimmingCharacters(in: .whitespaces)) }) {
            kill(pid, SIGKILL)
        }
    }

    /// Kills what is left in the namespaces and deletes them (their veths go with them) and the bridge.
    func remove() {
        for index in machines.indices {
            killAll(on: index + 1)
            _ = try? VirtualLAN.ip(["netns", "del", machines[index].namespace])
        }
        machines.removeAll()
        _ = try? VirtualLAN.ip(["link", "del", bridge])
    }

    /// A third octet no interface of this machine uses in 10.231.0.0/16.
    private static func unusedSubnet() throws -> Int {
        let used = try ip(["-4", "-o", "addr", "show"]).stdout
        for _ in 0..<50 {
            let candidate = Int.random(in: 1...254)
            if !used.contains("10.231.\(candidate).") { return candidate }
        }
        throw TestFailure("no free 10.231.N.0/24 subnet")
    }

    @discardableResult
    static func ip(_ arguments: [String]) throws -> ProcessResult {
        try ChildProcess.run(URL(fileURLWithPath: "/usr/sbin/ip"), arguments)
    }

    private static func must(_ arguments: [String]) throws {
        let result = try ip(arguments)
        guard result.status == 0 else {
            throw TestFailure("ip \(arguments.joined(separator: " ")) failed: \(result.stderr)")
        }
    }
}

struct TestFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
