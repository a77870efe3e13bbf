/// A rate written as curl's `--limit-rate` is: bytes per second, a number with an optional K, M
/// or G suffix in powers of 1024 (`500K`, `10M`, `1.5G`), optionally followed by `B`, `iB` and
/// `/s` (`10MiB/s`). `0` and `off` mean no cap. Shared by `--max-rate`, `queue rate` and every
/// plugin's `max_rate`, so one spelling works everywhere.
public enum ByteRateText {
    /// A parsed rate: bytes per second, or nil for "no cap" (`0`, `off`). nil when `text` is
    /// not a rate at all.
    public static func parse(_ text: String) -> Int64?? {
        var text = String(text.filter { !$0.isWhitespace }).lowercased()
        if text == "off" { return .some(nil) }
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
        return .some(bytes == 0 ? nil : bytes)
    }

    /// `bytes` per second the way people write it back: `512K`, `10M`, `1.5G`, `off`.
    public static func format(_ bytes: Int64?) -> String {
        guard let bytes else { return "off" }
        for (suffix, shift) in [("G", 30), ("M", 20), ("K", 10)] where bytes >= Int64(1) << shift {
            let value = Double(bytes) / Double(Int64(1) << shift)
            if value == value.rounded() { return "\(Int64(value))\(suffix)" }
            if (value * 10).rounded() == value * 10 { return "\(value)\(suffix)" }
        }
        return "\(bytes)"
    }
}
