import Foundation
import OrchestrateTestSupport
import Testing

/// The HTTP API's threads (its event loops and its workers for store reads) run at nice +10 and
/// no other thread of `serve` (the engine's) is lowered: when the cores are short, the runs come
/// first (bench/api). (libdispatch gives its own threads nice values by QoS, e.g. -4.)
@Suite struct APIThreadPriorityTests {
    @Test func theAPIsThreadsRunBelowTheEngines() throws {
        let serve = try APIServe()
        #expect(try serve.get("/api/runs").status == 200)  // the event loops and a worker have worked
        let threads = try Self.threads(of: serve.process.processIdentifier)
        let api = threads.filter { $0.name.hasPrefix("NIO-ELT") || $0.name.hasPrefix("http-api") }
        #expect(api.filter { $0.name.hasPrefix("NIO-ELT") }.count >= 1, "\(threads)")
        #expect(api.filter { $0.name.hasPrefix("http-api") }.count == 6, "\(threads)")  // 4 requests at once + 2
        #expect(api.allSatisfy { $0.nice == 10 }, "\(api)")
        let others = threads.filter { !api.map(\.id).contains($0.id) }
        #expect(others.contains { $0.id == Int(serve.process.processIdentifier) })
        #expect(others.first { $0.id == Int(serve.process.processIdentifier) }?.nice == 0)
        #expect(others.allSatisfy { $0.nice < 10 }, "\(others)")
    }

    struct ThreadInfo: CustomStringConvertible {
        let id: Int
        let name: String
        let nice: Int
        var description: String { "\(name)(\(id)): nice \(nice)" }
    }

    /// Each thread's name and nice value, from /proc/PID/task/TID/stat (nice is the 19th field;
    /// the name, in parentheses, may hold spaces).
    static func threads(of pid: Int32) throws -> [ThreadInfo] {
        let tasks = try FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")
        return tasks.compactMap { tid in
            guard let stat = try? String(contentsOfFile: "/proc/\(pid)/task/\(tid)/stat", encoding: .utf8),
                  let open = stat.firstIndex(of: "("), let close = stat.lastIndex(of: ")") else { return nil }
            let fields = stat[stat.index(after: close)...].split(separator: " ")
            guard fields.count > 16, let nice = Int(fields[16]), let id = Int(tid) else { return nil }
            return ThreadInfo(id: id, name: String(stat[stat.index(after: open)..<close]), nice: nice)
        }
    }
}
