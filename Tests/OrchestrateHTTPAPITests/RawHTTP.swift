import Foundation
import OrchestrateJSON

/// A tiny HTTP/1.1 client over a plain socket: exact control of headers and bodies (no
/// client library rewriting anything), and event streams read as they arrive.
struct RawHTTP {
    struct Reply {
        let status: Int
        let headers: [String: String]  // lower-cased names
        let body: String
        var json: JSONValue { (try? JSONValue(parsing: body)) ?? .null }
    }

    let port: Int

    static func connect(port: Int) throws -> Int32 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        let ok = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
        }
        guard ok else { close(fd); throw POSIXError(.ECONNREFUSED) }
        var timeout = timeval(tv_sec: 20, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        return fd
    }

    static func send(_ fd: Int32, _ bytes: [UInt8]) {
        var done = 0
        while done < bytes.count {
            let n = bytes[done...].withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
            if n <= 0 { return }  // the server may answer (413) and close before reading it all
            done += n
        }
    }

    static func head(_ method: String, _ path: String, token: String?, headers: [String: String], bodyLength: Int?) -> String {
        var text = "\(method) \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
        if let token { text += "Authorization: Bearer \(token)\r\n" }
        for (name, value) in headers { text += "\(name): \(value)\r\n" }
        if let bodyLength { text += "Content-Type: application/json\r\nContent-Length: \(bodyLength)\r\n" }
        return text + "\r\n"
    }

    func request(_ method: String, _ path: String, token: String?, body: String? = nil, headers: [String: String] = [:]) throws -> Reply {
        let fd = try Self.connect(port: port)
        defer { close(fd) }
        let bodyBytes = body.map { Array($0.utf8) }
        Self.send(fd, Array(Self.head(method, path, token: token, headers: headers, bodyLength: bodyBytes?.count).utf8) + (bodyBytes ?? []))
        var data = [UInt8]()
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = read(fd, &buffer, buffer.count)
            if n <= 0 { break }
            data += buffer[0..<n]
        }
        return try Self.parse(String(decoding: data, as: UTF8.self))
    }

    static func parse(_ text: String) throws -> Reply {
        guard let split = text.range(of: "\r\n\r\n") else { throw POSIXError(.EPROTO) }
        let lines = text[..<split.lowerBound].components(separatedBy: "\r\n")
        let status = Int(lines[0].split(separator: " ")[1]) ?? 0
        var headers: [String: String] = [:]
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        }
        var body = String(text[split.upperBound...])
        if headers["transfer-encoding"] == "chunked" { body = dechunk(body) }
        return Reply(status: status, headers: headers, body: body)
    }

    static func dechunk(_ text: String) -> String {
        var rest = Substring(text)
        var out = ""
        while let end = rest.range(of: "\r\n"), let size = Int(rest[..<end.lowerBound], radix: 16), size > 0 {
            let start = end.upperBound
            let stop = rest.utf8.index(start, offsetBy: size)
            out += rest[start..<stop]
            rest = rest[stop...].dropFirst(2)
        }
        return out
    }
}

/// An event-stream reader: opens `GET path`, hands each `id:`/`data:` event to the caller
/// until it returns false, then hangs up (as a browser losing its connection would).
struct SSEReader {
    let port: Int

    @discardableResult
    func read(_ path: String, token: String?, headers: [String: String] = [:],
              each: (_ id: Int64, _ data: JSONValue) -> Bool) throws -> (status: Int, headers: String)
    {
        let fd = try RawHTTP.connect(port: port)
        defer { close(fd) }
        RawHTTP.send(fd, Array(RawHTTP.head("GET", path, token: token, headers: headers, bodyLength: nil).utf8))
        var pending = ""
        var head: String?
        var buffer = [UInt8](repeating: 0, count: 65536)
        var id: Int64?
        while true {
            let n = Glibc.read(fd, &buffer, buffer.count)
            if n <= 0 { return (0, head ?? "") }
            pending += String(decoding: buffer[0..<n], as: UTF8.self)
            if head == nil {
                guard let split = pending.range(of: "\r\n\r\n") else { continue }
                head = String(pending[..<split.lowerBound])
                pending = String(pending[split.upperBound...])
                let status = Int(head!.split(separator: " ")[1]) ?? 0
                if status != 200 { return (status, head!) }
            }
            // Chunk-size lines are noise to a line reader that only wants id: and data: lines.
            // Lines split at the byte \n: to String, "\r\n" is one Character, not a "\n".
            while let newline = pending.utf8.firstIndex(of: UInt8(ascii: "\n")) {
                let line = String(pending[..<newline]).trimmingCharacters(in: CharacterSet(charactersIn: "\r"))
                pending = String(pending[pending.utf8.index(after: newline)...])
                if line.hasPrefix("id: ") { id = Int64(line.dropFirst(4)) }
                if line.hasPrefix("data: "), let eventID = id {
                    let data = (try? JSONValue(parsing: String(line.dropFirst(6)))) ?? .null
                    if !each(eventID, data) { return (200, head!) }
                    id = nil
                }
            }
        }
    }
}

/// A value shared between threads of a test.
final class Locked<Value>: @unchecked Sendable {
    private let lock = NSLock()
    private var stored: Value

    init(_ value: Value) { stored = value }

    var value: Value { lock.withLock { stored } }
    func update(_ change: (inout Value) -> Void) { lock.withLock { change(&stored) } }
}
