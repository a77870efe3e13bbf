// Standard 5-field cron expressions (`on.schedule[].cron`): parsing and matching wall-clock
// times. When a matching wall time happens in a time zone is CronExpression+NextTime.swift.

/// A parsed cron expression: minute, hour, day of month, month, day of week.
///
///     let cron = try CronExpression.parse("*/15 8-18 * * MON-FRI")
///     cron.matches(WallTime(year: 2026, month: 11, day: 23, hour: 9, minute: 30))   // true
///
/// Fields take `*`, numbers, ranges `a-b`, steps `*/n`, `a-b/n` and `a/n` (from a to the
/// field's end), and comma lists of those; months and days of the week also take their English
/// three-letter names (`JAN`, `MON`, any case). Day of week 0 and 7 are both Sunday. As in every
/// cron since Vixie's, when both day of month and day of week are restricted a day matching
/// either one matches. The aliases `@yearly` (`@annually`), `@monthly`, `@weekly`, `@daily`
/// (`@midnight`) and `@hourly` stand for their usual expressions.
public struct CronExpression: Sendable, Hashable, CustomStringConvertible {
    /// The text as written (an alias stays an alias).
    public let text: String
    let minutes: UInt64  // bit n: minute n
    let hours: UInt32
    let daysOfMonth: UInt32  // bits 1...31
    let months: UInt16  // bits 1...12
    let daysOfWeek: UInt8  // bits 0...6, Sunday 0
    let dayOfMonthRestricted: Bool
    let dayOfWeekRestricted: Bool
    /// Whether the hour field is not `*`: such a job is at fixed wall times, so it fires once on
    /// a day whose wall clock repeats an hour, and still fires on a day that skips its hour
    /// (see `nextTime(after:in:)`).
    let hourRestricted: Bool

    public var description: String { text }

    /// A problem in an expression, with the offset in `text` (in Unicode scalars) of the part at fault.
    public struct ParseError: Error, Sendable, Equatable {
        public let message: String
        public let offset: Int
    }

    static let aliases: [String: String] = [
        "@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *", "@monthly": "0 0 1 * *", "@weekly": "0 0 * * 0",
        "@daily": "0 0 * * *", "@midnight": "0 0 * * *", "@hourly": "0 * * * *",
    ]

    static let monthNames = ["JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"]
    static let dayNames = ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"]

    private struct Field {
        let name: String
        let range: ClosedRange<Int>
        let names: [String]  // names[i] stands for range.lowerBound + i
    }

    private static let fields = [
        Field(name: "minute", range: 0...59, names: []),
        Field(name: "hour", range: 0...23, names: []),
        Field(name: "day of month", range: 1...31, names: []),
        Field(name: "month", range: 1...12, names: monthNames),
        Field(name: "day of week", range: 0...7, names: dayNames + ["SUN"]),
    ]

    public static func parse(_ text: String) throws(ParseError) -> CronExpression {
        let trimmed = text.trimmingWhitespace
        var expanded = trimmed
        if trimmed.hasPrefix("@") {
            guard let replacement = aliases[trimmed.lowercased()] else {
                let known = aliases.keys.sorted().joined(separator: ", ")
                throw ParseError(message: "unknown cron alias '\(trimmed)' (aliases are \(known))", offset: leadingSpaces(text))
            }
            expanded = replacement
        }
        // Fields with their offsets in `text`, so an error points at the field at fault.
        var parts: [(text: String, offset: Int)] = []
        var current = ""
        var start = 0
        for (i, c) in expanded.unicodeScalars.enumerated() {
            if c == " " || c == "\t" {
                if !current.isEmpty { parts.append((current, start)) }
                current = ""
            } else {
                if current.isEmpty { start = i }
                current.unicodeScalars.append(c)
            }
        }
        if !current.isEmpty { parts.append((current, start)) }
        let base = trimmed.hasPrefix("@") ? nil : Optional(leadingSpaces(text))
        func at(_ offset: Int) -> Int { base.map { $0 + offset } ?? leadingSpaces(text) }
        guard parts.count == 5 else {
            let hint = parts.count == 6 ? " (seconds are not supported: drop the first field)" : ""
            throw ParseError(message: "a cron expression has 5 fields (minute hour day-of-month month day-of-week), "
                             + "not \(parts.count)\(hint)", offset: at(0))
        }
        var masks: [UInt64] = []
        for (field, part) in zip(fields, parts) {
            do {
                masks.append(try parseField(part.text, field))
            } catch {
                throw ParseError(message: error.message, offset: at(part.offset + error.offset))
            }
        }
        var weekdays = UInt8(truncatingIfNeeded: masks[4] & 0x7f)
        if masks[4] & (1 << 7) != 0 { weekdays |= 1 }  // 7 is Sunday too
        return CronExpression(
            text: trimmed, minutes: masks[0], hours: UInt32(masks[1]), daysOfMonth: UInt32(masks[2]),
            months: UInt16(masks[3]), daysOfWeek: weekdays,
            dayOfMonthRestricted: !parts[2].text.hasPrefix("*"), dayOfWeekRestricted: !parts[4].text.hasPrefix("*"),
            hourRestricted: !parts[1].text.hasPrefix("*"))
    }

    private static func leadingSpaces(_ text: String) -> Int {
        text.unicodeScalars.prefix { $0 == " " || $0 == "\t" }.count
    }

    /// One field as a bit mask; errors carry the offset within the field.
    private static func parseField(_ text: String, _ field: Field) throws(ParseError) -> UInt64 {
        var mask: UInt64 = 0
        var offset = 0
        for item in text.split(separator: ",", omittingEmptySubsequences: false).map(String.init) {
            defer { offset += item.unicodeScalars.count + 1 }
            guard !item.isEmpty else { throw ParseError(message: "empty entry in the \(field.name) field '\(text)'", offset: offset) }
            var rangeText = item
            var step = 1
            if let slash = item.firstIndex(of: "/") {
                rangeText = String(item[..<slash])
                let stepText = String(item[item.index(after: slash)...])
                guard let s = Int(stepText), s >= 1, s <= field.range.upperBound else {
                    throw ParseError(message: "invalid step '\(stepText)' in the \(field.name) field: write a whole number "
                                     + "from 1 to \(field.range.upperBound)", offset: offset + rangeText.unicodeScalars.count + 1)
                }
                step = s
            }
            var low: Int
            var high: Int
            if rangeText == "*" {
                (low, high) = (field.range.lowerBound, field.name == "day of week" ? 6 : field.range.upperBound)
            } else if let dash = rangeText.firstIndex(of: "-") {
                low = try value(String(rangeText[..<dash]), field, offset: offset)
                high = try value(String(rangeText[rangeText.index(after: dash)...]), field,
                                 offset: offset + rangeText[..<dash].unicodeScalars.count + 1)
                guard low <= high else {
                    throw ParseError(message: "the range '\(rangeText)' in the \(field.name) field runs backwards; "
                                     + "write the smaller value first", offset: offset)
                }
            } else {
                low = try value(rangeText, field, offset: offset)
                // `a/n` means from a to the end of the field.
                high = item.contains("/") ? (field.name == "day of week" ? 6 : field.range.upperBound) : low
            }
            for v in stride(from: low, through: high, by: step) { mask |= 1 << UInt64(v) }
        }
        return mask
    }

    private static func value(_ text: String, _ field: Field, offset: Int) throws(ParseError) -> Int {
        if let n = Int(text), text.allSatisfy(\.isNumber) {
            guard field.range.contains(n) else {
                throw ParseError(message: "\(n) is out of range for the \(field.name) field "
                                 + "(\(field.range.lowerBound)-\(field.range.upperBound))", offset: offset)
            }
            return n
        }
        if !field.names.isEmpty, let i = field.names.firstIndex(of: text.uppercased()) {
            return field.range.lowerBound + i
        }
        let namesHint = field.names.isEmpty ? "" : " or a name such as \(field.names[1])"
        throw ParseError(message: "invalid \(field.name) '\(text)': write a number from \(field.range.lowerBound) to "
                         + "\(field.range.upperBound)\(namesHint)", offset: offset)
    }

    /// Whether the expression matches a wall-clock minute.
    public func matches(_ w: WallTime) -> Bool {
        guard minutes & (1 << UInt64(w.minute)) != 0, hours & (1 << UInt32(w.hour)) != 0,
              months & (1 << UInt16(w.month)) != 0
        else { return false }
        return dayMatches(year: w.year, month: w.month, day: w.day)
    }

    func dayMatches(year: Int, month: Int, day: Int) -> Bool {
        let byMonthDay = daysOfMonth & (1 << UInt32(day)) != 0
        let byWeekDay = daysOfWeek & (1 << UInt8(WallTime.weekday(year: year, month: month, day: day))) != 0
        if dayOfMonthRestricted && dayOfWeekRestricted { return byMonthDay || byWeekDay }
        return byMonthDay && byWeekDay
    }
}

/// A wall-clock minute, in no particular time zone.
public struct WallTime: Sendable, Hashable, Comparable, CustomStringConvertible {
    public var year: Int
    public var month: Int
    public var day: Int
    public var hour: Int
    public var minute: Int

    public init(year: Int, month: Int, day: Int, hour: Int, minute: Int) {
        self.year = year
        self.month = month
        self.day = day
        self.hour = hour
        self.minute = minute
    }

    public var description: String {
        func two(_ n: Int) -> String { n < 10 ? "0\(n)" : "\(n)" }
        return "\(year)-\(two(month))-\(two(day)) \(two(hour)):\(two(minute))"
    }

    public static func < (a: WallTime, b: WallTime) -> Bool {
        (a.year, a.month, a.day, a.hour, a.minute) < (b.year, b.month, b.day, b.hour, b.minute)
    }

    /// Seconds since 1970 if this wall time were UTC: wall-clock arithmetic without a zone.
    public var utcSeconds: Int64 {
        Int64(WallTime.daysSince1970(year: year, month: month, day: day)) * 86_400 + Int64(hour * 3_600 + minute * 60)
    }

    /// The wall time of `seconds` since 1970 read as UTC (seconds dropped).
    public init(utcSeconds seconds: Int64) {
        let days = Int(seconds >= 0 ? seconds / 86_400 : (seconds - 86_399) / 86_400)
        let rest = Int(seconds - Int64(days) * 86_400)
        (year, month, day) = WallTime.civil(daysSince1970: days)
        hour = rest / 3_600
        minute = rest % 3_600 / 60
    }

    static func isLeap(_ y: Int) -> Bool { (y % 4 == 0 && y % 100 != 0) || y % 400 == 0 }

    static func daysIn(year: Int, month: Int) -> Int {
        [31, isLeap(year) ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31][month - 1]
    }

    /// 0 Sunday … 6 Saturday.
    static func weekday(year: Int, month: Int, day: Int) -> Int {
        ((daysSince1970(year: year, month: month, day: day) % 7) + 11) % 7  // 1970-01-01 was a Thursday
    }

    /// Days from 1970-01-01 in the proleptic Gregorian calendar (Howard Hinnant's algorithm).
    static func daysSince1970(year: Int, month: Int, day: Int) -> Int {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let doy = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146_097 + doe - 719_468
    }

    static func civil(daysSince1970 days: Int) -> (Int, Int, Int) {
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let day = doy - (153 * mp + 2) / 5 + 1
        let month = mp < 10 ? mp + 3 : mp - 9
        return (yoe + era * 400 + (month <= 2 ? 1 : 0), month, day)
    }
}
