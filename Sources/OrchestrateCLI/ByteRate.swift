import ArgumentParser

/// A `--max-rate` value: bytes per second, written as curl's `--limit-rate` is: a number with
/// an optional K, M or G suffix in powers of 1024 (`500K`, `10M`, `1.5G`), optionally followed by
/// `B`, `iB` and `/s` (`10MiB/s`). `0` means no cap.
struct ByteRate: ExpressibleByArgument, Equatable {
    /// Bytes per second; nil for "no cap".
    let bytesPerSecond: Int64?

    init?(argument: String) {
        var text = argument.trimmingCharacters(in: .whitespaces).lowercased()
        if text.hasSuffix("/s") { text.removeLast(2) }
        if text.hasSuffix("ib") { text.removeLast(2) } else if text.hasSuffix("b") { text.removeLast() }
        var multiplier: Double = 1
        if let unit = text.last, let power = ["k": 1, "m": 2, "g": 3][unit] {
            multiplier = Double(1 << (10 * power))
            text.removeLast()
        }
        guard !text.isEmpty, text.allSatisfy({ $0.isNumber || $0 == "." }), let number = Double(text),
              number.isFinite, number >= 0, number * multiplier < Double(Int64.max / 2)
        else { return nil }
        let bytes = Int64((number * multiplier).rounded())
        if number > 0 && bytes == 0 { return nil }
        bytesPerSecond = bytes == 0 ? nil : bytes
    }

    static var defaultValueDescription: String { "rate" }

    /// The help text shared by the commands that take `--max-rate`.
    static func help(_ scope: String) -> ArgumentHelp {
        ArgumentHelp("Bandwidth cap for \(scope), in bytes per second with an optional K, M or G suffix (powers of 1024, as curl's --limit-rate): 500K, 10M, 1.5G. 0 removes a cap.",
                     valueName: "rate")
    }
}
