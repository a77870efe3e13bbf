// Durations as workflows write them: "500ms", "30s", "10m", "6h", and sums such as "1h30m".

/// Parses a workflow duration: one or more `<number><unit>` parts with units `ms`, `s`, `m`, `h`
/// (`d` for days too), no spaces. Numbers may have a fraction ("1.5s"). Returns nil for anything
/// else, including a bare number, so `timeout: 30` is reported instead of guessed at.
///
///     parseDuration("1h30m")   // .seconds(5400)
///     parseDuration("500ms")   // .milliseconds(500)
///     parseDuration("10 minutes")  // nil
public func parseDuration(_ text: String) -> Duration? {
    let scalars = Array(text.unicodeScalars)
    guard !scalars.isEmpty else { return nil }
    var index = 0
    var total = Duration.zero
    var lastUnitRank = Int.max  // units must go from larger to smaller ("30m1h" is refused)
    while index < scalars.count {
        let numberStart = index
        while index < scalars.count, ("0"..."9").contains(scalars[index]) || scalars[index] == "." { index += 1 }
        guard index > numberStart,
              let number = Double(String(String.UnicodeScalarView(scalars[numberStart..<index]))),
              number.isFinite
        else { return nil }
        let unitStart = index
        while index < scalars.count, ("a"..."z").contains(scalars[index]) { index += 1 }
        let unit = String(String.UnicodeScalarView(scalars[unitStart..<index]))
        let (rank, seconds): (Int, Double)
        switch unit {
        case "d": (rank, seconds) = (5, 86_400)
        case "h": (rank, seconds) = (4, 3_600)
        case "m": (rank, seconds) = (3, 60)
        case "s": (rank, seconds) = (2, 1)
        case "ms": (rank, seconds) = (1, 0.001)
        default: return nil
        }
        guard rank < lastUnitRank else { return nil }
        lastUnitRank = rank
        let value = number * seconds
        guard value < 1e12 else { return nil }  // about 31,000 years: surely a typo
        if number.rounded() == number, seconds >= 1 {
            total += .seconds(Int64(number) * Int64(seconds))
        } else if number.rounded() == number {
            total += .milliseconds(Int64(number))
        } else {
            total += .nanoseconds(Int64((value * 1e9).rounded()))
        }
    }
    return total
}

extension Duration {
    /// The duration in seconds as a Double (attosecond precision is more than any delay needs).
    public var inSeconds: Double {
        Double(components.seconds) + Double(components.attoseconds) * 1e-18
    }

    /// The duration written the way a workflow would write it: "1h30m", "500ms", "0s".
    public var workflowText: String {
        var ms = Int64((inSeconds * 1000).rounded())
        if ms == 0 { return "0s" }
        var out = ms < 0 ? "-" : ""
        ms = abs(ms)
        for (unit, size) in [("h", Int64(3_600_000)), ("m", 60_000), ("s", 1000), ("ms", 1)] where ms >= size {
            out += "\(ms / size)\(unit)"
            ms %= size
        }
        return out
    }
}
