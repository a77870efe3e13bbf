import ArgumentParser
import OrchestrateModel
import OrchestrateStore

/// A retention period as `prune --older-than` and `queue retention` take it: a duration
/// (`30d`, `12h`, `90m`) or, where a setting is meant, `off` (kept until pruned by hand).
enum RetentionPeriod {
    static func seconds(_ text: String, allowOff: Bool) throws -> Double {
        if allowOff && text == "off" { return RetentionSettings.forever }
        guard let duration = parseDuration(text), duration > .zero else {
            throw ValidationError("'\(text)' is not a retention period: write a duration such as 30d, 12h or 90m"
                + (allowOff ? ", or off" : ""))
        }
        let parts = duration.components
        return Double(parts.seconds) + Double(parts.attoseconds) * 1e-18
    }

    /// `30d`, `12h`, `off`: how `queue retention` shows a period.
    static func text(_ seconds: Double) -> String {
        if seconds.isInfinite { return "off" }
        var rest = Int64(seconds.rounded())
        var out = ""
        for (unit, size) in [("d", Int64(86_400)), ("h", 3_600), ("m", 60), ("s", 1)] where rest >= size {
            out += "\(rest / size)\(unit)"
            rest %= size
        }
        return out.isEmpty ? "0s" : out
    }
}
