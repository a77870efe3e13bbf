#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The fields of `/proc/PID/stat` that tell which process group a process belongs to and
/// whether it is the same process as one seen earlier (Linux only; elsewhere nothing is found).
struct ProcessEntry: Equatable {
    let pid: pid_t
    /// R, S, D, T, Z (zombie), X (dead), …
    let state: Character
    let processGroup: pid_t
    let session: pid_t
    /// Clock ticks after boot at which the process started: with the boot id, a pid that was
    /// reused shows a different value.
    let startTime: UInt64

    /// Still able to run (a zombie or dead entry does nothing more).
    var isLive: Bool { state != "Z" && state != "X" }
}

enum ProcessTable {
    /// The entry of `pid`, or nil when there is no such process.
    static func entry(_ pid: pid_t) -> ProcessEntry? {
        let fd = open("/proc/\(pid)/stat", O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var buffer = [UInt8](repeating: 0, count: 1024)
        let count = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        guard count > 0 else { return nil }
        // "pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt
        // utime stime cutime cstime priority nice threads itrealvalue starttime …": comm may hold
        // spaces and parentheses, so the fields are counted from the last ')'.
        guard let close = buffer[..<count].lastIndex(of: UInt8(ascii: ")")) else { return nil }
        let fields = buffer[(close + 1)..<count].split(separator: UInt8(ascii: " "))
        guard fields.count > 19, let state = fields[0].first,
              let group = Int32(String(decoding: fields[2], as: UTF8.self)),
              let session = Int32(String(decoding: fields[3], as: UTF8.self)),
              let start = UInt64(String(decoding: fields[19], as: UTF8.self))
        else { return nil }
        return ProcessEntry(pid: pid, state: Character(UnicodeScalar(state)), processGroup: group, session: session,
                            startTime: start)
    }

    /// Every process whose entry could be read.
    static func all() -> [ProcessEntry] {
        guard let directory = opendir("/proc") else { return [] }
        defer { closedir(directory) }
        var entries: [ProcessEntry] = []
        while let item = readdir(directory) {
            let name = withUnsafeBytes(of: item.pointee.d_name) { String(cString: $0.bindMemory(to: CChar.self).baseAddress!) }
            if let pid = Int32(name), let entry = entry(pid) { entries.append(entry) }
        }
        return entries
    }

    /// This boot's id (/proc/sys/kernel/random/boot_id): start times only compare within one boot.
    static let bootID: String = {
        let fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return "" }
        defer { close(fd) }
        var buffer = [UInt8](repeating: 0, count: 64)
        let count = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        return count > 0 ? String(decoding: buffer[..<count].filter { $0 != UInt8(ascii: "\n") }, as: UTF8.self) : ""
    }()
}
