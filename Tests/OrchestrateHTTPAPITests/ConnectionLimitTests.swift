import Foundation
import OrchestrateJSON
import OrchestrateTestSupport
import Testing

/// Hostile clients of `serve --http` (ConnectionGuard, RequestAdmission): sockets that send half
/// a request and wait, bodies that trickle, floods past the descriptor limit. Against the real
/// binary, loopback only, each bounded in time.
@Suite(.serialized) struct ConnectionLimitTests {
    static let execWorkflow = "version: 1\nname: flood-proof\nsteps:\n  a: { uses: exec, with: { command: [\"true\"] } }\n"

    /// Connects, sends `bytes`, and leaves the socket open (reads time out after `wait` s).
    static func open(_ port: Int, sending bytes: String, wait: Int = 20) throws -> Int32 {
        let fd = try RawHTTP.connect(port: port)
        var timeout = timeval(tv_sec: wait, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        RawHTTP.send(fd, Array(bytes.utf8))
        return fd
    }

    /// Reads until the server closes `fd`: what it sent, and whether it closed (not a read timeout).
    static func readToClose(_ fd: Int32) -> (text: String, closed: Bool) {
        var data = [UInt8]()
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = read(fd, &buffer, buffer.count)
            if n == 0 { return (String(decoding: data, as: UTF8.self), true) }
            if n < 0 { return (String(decoding: data, as: UTF8.self), errno == ECONNRESET) }
            data += buffer[0..<n]
        }
    }

    /// User + system CPU seconds of `pid` so far (/proc/PID/stat, fields 14 and 15).
    static func cpuSeconds(_ pid: Int32) -> Double {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
              let end = text.lastIndex(of: ")") else { return 0 }
        let fields = text[text.index(after: end)...].split(separator: " ")
        // fields[0] is the state (field 3): utime and stime are fields 14 and 15.
        return Double((Int(fields[11]) ?? 0) + (Int(fields[12]) ?? 0)) / Double(sysconf(Int32(_SC_CLK_TCK)))
    }

    static func descriptors(_ pid: Int32) -> Int {
        (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd").count) ?? 0
    }

    /// Raises this process's soft descriptor limit to at least `wanted` (within the hard limit).
    static func raiseDescriptorLimit(_ wanted: Int) {
        var limit = rlimit()
        getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
        if limit.rlim_cur < rlim_t(wanted) {
            limit.rlim_cur = min(rlim_t(wanted), limit.rlim_max)
            setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
        }
    }

    /// Submits the one-exec-step workflow and waits for it to succeed.
    static func runSucceeds(_ serve: APIServe) throws -> Bool {
        let submitted = try serve.post("/api/runs", ["workflow_yaml": .string(execWorkflow)])
        guard submitted.status == 201, let id = submitted.json["id"]?.stringValue else { return false }
        return try serve.waitFor(30) { try serve.status(id) == "succeeded" }
    }

    @Test func slowHeadSlowBodyAndIdleConnectionsAreClosed() throws {
        let serve = try APIServe(extra: ["--http-head-timeout", "1", "--http-body-timeout", "2", "--http-idle-timeout", "1"])
        let start = Date()
        // Half a request line, then nothing.
        let slowHead = try Self.open(serve.port, sending: "GET /api/runs HT", wait: 8)
        defer { close(slowHead) }
        // A complete head, then a body that trickles a byte every 0.3 s: busy, but too slow.
        let slowBody = try Self.open(serve.port, sending: RawHTTP.head("POST", "/api/runs", token: serve.token, headers: [:], bodyLength: 1000),
                                     wait: 8)
        defer { close(slowBody) }
        let trickling = Locked(true)
        Thread {
            while trickling.value {
                if send(slowBody, "{", 1, Int32(MSG_NOSIGNAL)) < 0 { return }
                Thread.sleep(forTimeInterval: 0.3)
            }
        }.start()
        defer { trickling.update { $0 = false } }

        let head = Self.readToClose(slowHead)
        let headClosed = Date().timeIntervalSince(start)
        #expect(head.closed && head.text.isEmpty && headClosed > 0.7 && headClosed < 3, "slow head: closed \(head.closed) after \(headClosed) s")
        let body = Self.readToClose(slowBody)
        let bodyClosed = Date().timeIntervalSince(start)
        #expect(body.closed && bodyClosed > 1.5 && bodyClosed < 4.5, "slow body: closed \(body.closed) after \(bodyClosed) s: \(body.text)")

        // A keep-alive connection: answered, then closed once idle for 1 s.
        let idle = try Self.open(serve.port, sending: "GET /api/queues HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer \(serve.token)\r\n\r\n",
                                 wait: 8)
        defer { close(idle) }
        var buffer = [UInt8](repeating: 0, count: 65536)
        let n = read(idle, &buffer, buffer.count)
        let answered = Date()
        #expect(n > 0 && String(decoding: buffer[0..<max(n, 0)], as: UTF8.self).hasPrefix("HTTP/1.1 200"))
        let rest = Self.readToClose(idle)
        let idleFor = Date().timeIntervalSince(answered)
        #expect(rest.closed && idleFor > 0.7 && idleFor < 3, "idle keep-alive: closed \(rest.closed) after \(idleFor) s")
    }

    /// Four write-token clients trickling bodies hold no admission slot: with one slot and no
    /// waiting room, a read is answered at once.
    @Test func slowBodiesHoldNoAdmissionSlot() throws {
        let serve = try APIServe(extra: ["--http-max-requests", "1", "--http-max-waiting", "0"])
        let head = RawHTTP.head("POST", "/api/runs", token: serve.token, headers: [:], bodyLength: 1000)
        let bodies = try (0..<4).map { _ in try Self.open(serve.port, sending: head + "{") }
        defer { bodies.forEach { close($0) } }
        Thread.sleep(forTimeInterval: 0.5)
        for _ in 0..<3 {
            let started = Date()
            let reply = try serve.get("/api/queues")
            let took = Date().timeIntervalSince(started)
            #expect(reply.status == 200 && took < 1, "a read under slow bodies: \(reply.status) after \(took) s: \(reply.body)")
        }
    }

    /// The issue's case: 2,000 idle unauthenticated connections (re-opened as the server closes
    /// them) plus four slow bodies. Runs keep succeeding, a read answers within a second, serve
    /// survives, and its descriptors stay bounded (512 connections at most, by default).
    @Test func floodOfIdleConnectionsAndSlowBodies() throws {
        Self.raiseDescriptorLimit(4096)
        let serve = try APIServe()
        let pid = serve.process.processIdentifier
        let baseline = Self.descriptors(pid)
        // What a read costs on this machine now, before the flood: the yardstick for "slow"
        // below (the suite shares two cores with builds and other suites).
        var quiet: [Double] = []
        for _ in 0..<10 {
            let started = Date()
            _ = try? serve.get("/api/runs")
            quiet.append(Date().timeIntervalSince(started))
            Thread.sleep(forTimeInterval: 0.05)
        }
        let quietMedian = quiet.sorted()[quiet.count / 2]
        let stop = Locked(false)
        let halfLine = "GET /api/runs HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: "
        // The idle flood: 2,000 sockets; each one the server closes is opened again (at most
        // 200 a second, so loopback's ephemeral ports last).
        let opened = Locked(0)
        let flood = Thread {
            var idle: [Int32] = []
            for _ in 0..<2000 {
                guard let fd = try? Self.open(serve.port, sending: halfLine) else { continue }
                idle.append(fd)
            }
            opened.update { $0 = idle.count }
            var reopened = 0
            var second = Date()
            while !stop.value {
                var polls = idle.map { pollfd(fd: $0, events: Int16(POLLIN), revents: 0) }
                _ = poll(&polls, nfds_t(polls.count), 100)
                var byte: UInt8 = 0
                for (i, entry) in polls.enumerated() where entry.revents != 0 && recv(entry.fd, &byte, 1, Int32(MSG_DONTWAIT)) <= 0 {
                    if Date().timeIntervalSince(second) >= 1 { second = Date(); reopened = 0 }
                    guard reopened < 200, let fd = try? Self.open(serve.port, sending: halfLine) else { break }
                    close(entry.fd)
                    idle[i] = fd
                    reopened += 1
                }
            }
            idle.forEach { close($0) }
        }
        // Four slow bodies with the write token, a byte a second, re-opened when closed.
        let bodyHead = RawHTTP.head("POST", "/api/runs", token: serve.token, headers: [:], bodyLength: 100_000)
        let slowBodies = Thread {
            var bodies = (0..<4).compactMap { _ in try? Self.open(serve.port, sending: bodyHead) }
            while !stop.value {
                for (i, fd) in bodies.enumerated() where send(fd, "{", 1, Int32(MSG_NOSIGNAL)) < 0 {
                    close(fd)
                    if let again = try? Self.open(serve.port, sending: bodyHead) { bodies[i] = again }
                }
                Thread.sleep(forTimeInterval: 1)
            }
            bodies.forEach { close($0) }
        }
        flood.start()
        slowBodies.start()
        #expect(serve.waitFor(60) { opened.value > 0 }, "the flood did not start")
        #expect(opened.value == 2000, "\(opened.value) flood connections")
        let most = Locked(0)
        let sampler = Thread {
            while !stop.value {
                let count = Self.descriptors(pid)
                most.update { $0 = max($0, count) }
                Thread.sleep(forTimeInterval: 0.1)
            }
        }
        sampler.start()

        let until = Date().addingTimeInterval(15)
        var reads: [Double] = []
        var runs = 0
        while Date() < until {
            let started = Date()
            let reply = try? serve.get("/api/runs")
            let took = Date().timeIntervalSince(started)
            #expect(reply?.status == 200 && took < 3, "an authenticated read under the flood: \(reply?.status ?? 0) after \(took) s")
            reads.append(took)
            if runs < 3 {
                #expect(try Self.runSucceeds(serve), "a run under the flood")
                runs += 1
            }
            Thread.sleep(forTimeInterval: 0.3)
        }
        // Each within 3 s (above), most within a second (or five quiet reads, on a machine
        // loaded before the flood began): the API's threads run at nice +10 (APIThreads) on a
        // machine the tests share with builds, whose load can rise after the quiet reads (a
        // third of the reads were slow once, beside a benchmark).
        let slowAt = max(1, 5 * quietMedian)
        let slow = reads.filter { $0 >= slowAt }.count
        #expect(slow * 2 < reads.count,
                "\(slow) of \(reads.count) reads took \(slowAt) s or more (a quiet read: \(quietMedian) s): \(reads.sorted().suffix(5))")
        #expect(serve.process.isRunning, "serve died under the flood")
        stop.update { $0 = true }
        Thread.sleep(forTimeInterval: 0.5)
        let peak = most.value
        // 512 connections and the 16 accepted past them while the oldest close (AcceptedSocketBound),
        // the descriptors serve started with, and the runs' own.
        #expect(peak <= baseline + 512 + 16 + 40, "serve held \(peak) descriptors (\(baseline) at start)")
        // Once the clients are gone, serve lets their connections go.
        #expect(serve.waitFor(15) { Self.descriptors(pid) <= baseline + 16 }, "descriptors after the flood: \(Self.descriptors(pid))")
        #expect(try Self.runSucceeds(serve))
        print("flood: \(reads.count) reads, slowest \(String(format: "%.3f", reads.max() ?? 0)) s; descriptors at most \(peak) (\(baseline) at start)")
    }

    /// Started with `ulimit -n 64` and flooded with 300 connections, serve does not spin (its
    /// CPU stays low while they wait), still answers, and runs again once they are gone.
    @Test func floodUnderALowDescriptorLimitDoesNotSpin() throws {
        let serve = try APIServe(descriptorLimit: 64)
        let pid = serve.process.processIdentifier
        // The cap is half the descriptor limit, and serve says so.
        let said = (try? String(contentsOfFile: serve.dir.file("serve.err").path, encoding: .utf8)) ?? ""
        #expect(said.contains("warning: the HTTP API takes at most 32 connections, not 512"), "\(said)")
        var flood: [Int32] = []
        for _ in 0..<300 {
            guard let fd = try? Self.open(serve.port, sending: "GET /api/runs HT") else { break }
            flood.append(fd)
        }
        defer { flood.forEach { close($0) } }
        Thread.sleep(forTimeInterval: 1)
        let before = Self.cpuSeconds(pid)
        Thread.sleep(forTimeInterval: 4)
        let used = Self.cpuSeconds(pid) - before
        #expect(used < 0.4, "serve used \(used) s of CPU in 4 s while flooded")
        // Still answers meanwhile (it closes the oldest waiting connection to make room).
        let reply = try? serve.get("/api/queues")
        #expect(reply?.status == 200, "\(reply?.status ?? 0)")
        flood.forEach { close($0) }
        flood = []
        #expect(try Self.runSucceeds(serve), "a run once the flood is gone")
        print("low descriptor limit: \(used) s CPU in 4 s under a flood of 300 connections")
    }

    /// A client that asks and never reads its answers (its connection stays unwritable) is
    /// closed after the idle deadline instead of holding its connection for ever.
    ///
    /// The server first fills its socket's send buffer (megabytes, autotuned by the kernel) with
    /// answers, which takes a loaded machine many seconds (CI once needed more than 15). So the
    /// bound is generous: without the stall deadline the connection is never closed at all.
    /// Requests without a token announcing a body they never send: each is answered 401 and its
    /// connection closed, so a flood of them cannot hold every place and lock the real clients
    /// out (they stayed open, waiting for a body nobody would read, and could not be closed to
    /// make room).
    @Test func headsAnnouncingABodyWithoutATokenCannotLockClientsOut() throws {
        let serve = try APIServe(extra: ["--http-max-connections", "16"])
        let heads = ["GET /api/runs HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n",
                     "POST /api/runs HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"]
        var sockets: [Int32] = []
        defer { for fd in sockets { close(fd) } }
        for i in 0..<32 { sockets.append(try Self.open(serve.port, sending: heads[i % 2], wait: 5)) }
        Thread.sleep(forTimeInterval: 0.5)
        let started = Date()
        let reply = try serve.get("/api/queues")
        #expect(reply.status == 200, "a real client is let in: \(reply.status)")
        #expect(Date().timeIntervalSince(started) < 2)
        // Each flooding socket had its 401, then its connection closed.
        let (text, closed) = Self.readToClose(sockets[0])
        #expect(text.hasPrefix("HTTP/1.1 401") && closed, "\(text.prefix(200)) closed: \(closed)")
        // A client still sending its body when the 401 comes gets it whole, then the end of the
        // connection within the 2 s the server drops its bytes for (a lingering close).
        let sending = try Self.open(serve.port, sending: "POST /api/runs HTTP/1.1\r\nHost: x\r\nContent-Length: 8000000\r\n\r\n", wait: 10)
        defer { close(sending) }
        let body = Thread {
            let chunk = [UInt8](repeating: 0x61, count: 65536)
            for _ in 0..<60 {
                guard chunk.withUnsafeBytes({ Glibc.send(sending, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }) > 0 else { return }
                usleep(20_000)
            }
        }
        body.start()
        let lingered = Date()
        let (answer, ended) = Self.readToClose(sending)
        #expect(answer.hasPrefix("HTTP/1.1 401") && ended, "\(answer.prefix(200)) ended: \(ended)")
        #expect(Date().timeIntervalSince(lingered) < 5)
    }

    /// A client that stops reading its answers is let go. With more answers than the kernel's
    /// buffers hold (1,000 of some 20 KB), the bytes waiting in serve stop leaving: the
    /// connection is reset after the idle deadline, and the client hears of it. A plain close
    /// queued its FIN behind the answers the client did not take: it never did, unless unread
    /// requests made the kernel reset the connection anyway, so this test failed now and then.
    /// (With fewer answers than the kernel's buffers hold, the keep-alive deadline closes the
    /// connection plainly, so that a slow reader still gets its last answer: nothing the client
    /// can see, so not asserted here.)
    @Test func aClientThatStopsReadingIsClosed() throws {
        let serve = try APIServe(extra: ["--http-idle-timeout", "1"])
        let fd = try RawHTTP.connect(port: serve.port)
        defer { close(fd) }
        var small: Int32 = 4096
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, socklen_t(MemoryLayout<Int32>.size))
        // 1,000 pipelined requests for the OpenAPI document (some 20 MB of answers), none read.
        let request = "GET /api/openapi.json HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer \(serve.token)\r\n\r\n"
        let sender = Thread { RawHTTP.send(fd, Array(String(repeating: request, count: 1000).utf8)) }
        sender.start()
        let started = Date()
        var hungUp = false
        while !hungUp && Date().timeIntervalSince(started) < 90 {
            var entry = pollfd(fd: fd, events: Int16(0x2000 /* POLLRDHUP */), revents: 0)
            _ = poll(&entry, 1, 100)
            hungUp = entry.revents & Int16(0x2000 | POLLHUP | POLLERR) != 0
        }
        let took = Date().timeIntervalSince(started)
        #expect(hungUp, "a client that does not read: still open after \(took) s")
        // It was closed for not reading, not refused: what it was sent starts with an answer.
        var head = [UInt8](repeating: 0, count: 12)
        let n = read(fd, &head, head.count)
        #expect(n == head.count && String(decoding: head, as: UTF8.self) == "HTTP/1.1 200", "\(String(decoding: head.prefix(max(n, 0)), as: UTF8.self))")
        print("a client that does not read: closed after \(String(format: "%.1f", took)) s")
    }

    /// An event stream's slot is free as soon as its client hangs up (not at the next keep-alive).
    @Test func eventStreamSlotIsFreedWhenTheClientHangsUp() throws {
        let serve = try APIServe(extra: ["--http-max-streams", "1"])
        func openStream() throws -> (fd: Int32, status: Int) {
            let fd = try Self.open(serve.port, sending: RawHTTP.head("GET", "/api/events?after=end", token: serve.token, headers: [:], bodyLength: nil),
                                   wait: 5)
            var text = ""
            var buffer = [UInt8](repeating: 0, count: 4096)
            while !text.contains("\r\n\r\n") {
                let n = read(fd, &buffer, buffer.count)
                if n <= 0 { break }
                text += String(decoding: buffer[0..<n], as: UTF8.self)
            }
            return (fd, Int(text.split(separator: " ").dropFirst().first ?? "") ?? 0)
        }
        // A client that closes its socket, and one that only shuts its sending side (a FIN,
        // the socket still open: writes to it still succeed).
        for shutsDownOnly in [false, true] {
            let first = try openStream()
            #expect(first.status == 200)
            let second = try openStream()
            close(second.fd)
            #expect(second.status == 503, "the one slot is taken: \(second.status)")
            if shutsDownOnly { shutdown(first.fd, Int32(SHUT_WR)) } else { close(first.fd) }
            defer { if shutsDownOnly { close(first.fd) } }
            let hungUp = Date()
            var status = 0
            while status != 200 && Date().timeIntervalSince(hungUp) < 3 {
                let again = try openStream()
                close(again.fd)
                status = again.status
                if status != 200 { Thread.sleep(forTimeInterval: 0.05) }
            }
            let took = Date().timeIntervalSince(hungUp)
            #expect(status == 200 && took < 1, "\(shutsDownOnly ? "shut down" : "closed"): the slot came back after \(took) s (status \(status))")
            // The stream just opened has hung up too: its slot is back before the next round.
            Thread.sleep(forTimeInterval: 0.5)
        }
    }
}
