import Foundation
import OrchestrateJSON

/// The JSON lines of `add-path --from` ({"source": …, "destination": …}), read a line at a time
/// so that 100,000 paths cost no more memory than ten: `add-path` reads them all once to check
/// them (a bad line anywhere adds nothing), then again to add them. Standard input is copied to
/// a temporary file of this user's (0600, removed at once) to be read twice.
final class PathLines {
    private let file: UnsafeMutablePointer<FILE>
    /// As errors name it: the file, or "stdin".
    let name: String

    init(from: String) throws {
        if from == "-" {
            guard let spool = tmpfile() else { throw CLIFailure.usage("cannot buffer stdin: \(String(cString: strerror(errno)))") }
            var buffer = [UInt8](repeating: 0, count: 1 << 16)
            while true {
                let got = read(STDIN_FILENO, &buffer, buffer.count)
                if got < 0 && errno == EINTR { continue }
                guard got >= 0 else { fclose(spool); throw CLIFailure.usage("cannot read stdin: \(String(cString: strerror(errno)))") }
                if got == 0 { break }
                guard fwrite(buffer, 1, got, spool) == got else {
                    fclose(spool)
                    throw CLIFailure.usage("cannot buffer stdin: \(String(cString: strerror(errno)))")
                }
            }
            file = spool
            name = "stdin"
        } else {
            guard let opened = fopen(from, "r") else { throw CLIFailure.usage("cannot read \(from)") }
            file = opened
            name = from
        }
    }

    deinit { fclose(file) }

    /// Calls `body` with each path, in order; throws a usage error at the first line that is
    /// not a path.
    func forEach(_ body: (String, String) throws -> Void) throws {
        rewind(file)
        var line: UnsafeMutablePointer<CChar>?
        var capacity = 0
        defer { free(line) }
        var number = 0
        while getline(&line, &capacity, file) >= 0, let line {
            number += 1
            // ASCII blanks trimmed on the bytes (Foundation's trimming of every line was a tenth
            // of the command's time at 100,000 lines); a line blank in any other way is still skipped.
            var bytes = UnsafeRawBufferPointer(start: line, count: strlen(line))
            while let first = bytes.first, Self.isBlank(first) { bytes = UnsafeRawBufferPointer(rebasing: bytes.dropFirst()) }
            while let last = bytes.last, Self.isBlank(last) { bytes = UnsafeRawBufferPointer(rebasing: bytes.dropLast()) }
            if bytes.isEmpty { continue }
            let text = String(decoding: bytes, as: UTF8.self)
            guard let value = try? JSONValue(parsing: text), let source = value["source"]?.stringValue,
                  let destination = value["destination"]?.stringValue
            else {
                if text.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty { continue }
                throw CLIFailure.usage("\(name):\(number): expected {\"source\": …, \"destination\": …}")
            }
            try body(source, destination)
        }
        guard ferror(file) == 0 else { throw CLIFailure.usage("cannot read \(name): \(String(cString: strerror(errno)))") }
    }

    private static func isBlank(_ byte: UInt8) -> Bool {
        byte == 0x20 || (0x09...0x0D).contains(byte)
    }
}
