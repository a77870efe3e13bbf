#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A `--max-rate` value: one rate (`10M`, `off`), or a weekly timetable in rclone's `--bwlimit`
/// form, whose rate changes at given local times:
///
///     08:00,512K 23:00,off                    every day: 512 KiB/s from 08:00, no cap from 23:00
///     Mon-Fri 08:00,10M 19:00,off             weekdays capped in office hours, weekends free
///     Mon-Fri 08:00,10M 19:00,off Sat,Sun 10:00,1M
///     Mon-08:00,512K Fri-18:00,off            rclone's per-entry day prefix
///
/// Entries are `HH:MM,RATE` (24-hour local time, a rate as `ByteRateText` reads it); a day list
/// (`Mon`, `Mon-Fri`, `Sat,Sun`, `Fri-Mon`) applies to the entries after it, until the next day
/// list; entries before any day list apply every day. Space or `;` separates the tokens. At any
/// instant the rate is that of the latest entry at or before it in the week, wrapping around to
/// last week's latest (so in the second example Saturday is uncapped: Friday 19:00 was last).
///
/// Unlike rclone, a bare number is bytes per second (rclone: KiB/s), and one rate covers both
/// directions: rclone's `UP:DOWN` pairs (`512K:1M`) are refused, because the host's caps account
/// bytes without a direction (`orc_bandwidth_v1.consume`).
public struct RateTimetable: Sendable, Equatable, CustomStringConvertible {
    /// The text it was parsed from (journaled with a run, shown by `status`).
    public let text: String
    /// Sorted by minute of the week; empty for a constant rate.
    let changes: [Change]
    /// The rate when `changes` is empty.
    let constant: Int64?

    struct Change: Equatable, Sendable {
        /// Minutes since Monday 00:00.
        let minuteOfWeek: Int
        let bytesPerSecond: Int64?
        /// The entry as written, for error messages.
        let entry: String
    }

    /// No cap at all.
    public static let unlimited = RateTimetable(text: "off", changes: [], constant: nil)

    /// A constant cap of `bytesPerSecond` (nil: none).
    public init(bytesPerSecond: Int64?) {
        self.init(text: ByteRateText.format(bytesPerSecond), changes: [], constant: bytesPerSecond)
    }

    private init(text: String, changes: [Change], constant: Int64?) {
        self.text = text
        self.changes = changes
        self.constant = constant
    }

    public var description: String { text }

    /// True when the rate changes with the time of day or week.
    public var isTimetable: Bool { !changes.isEmpty }

    /// The constant rate (nil: no cap), or nil when this is a timetable.
    public var constantRate: Int64?? { isTimetable ? nil : .some(constant) }

    /// The rate in force at minute `minuteOfWeek` (0 = Monday 00:00), nil for no cap.
    public func rate(atMinuteOfWeek minuteOfWeek: Int) -> Int64? {
        guard let last = changes.last else { return constant }
        // Not `?.bytesPerSecond ?? …`: an entry's nil (`off`) is an answer, not "no entry".
        if let current = changes.last(where: { $0.minuteOfWeek <= minuteOfWeek }) { return current.bytesPerSecond }
        return last.bytesPerSecond  // before this week's first change: last week's latest
    }

    /// The rate in force at `epochSeconds` in the process's local time zone (TZ).
    public func rate(atEpochSeconds epochSeconds: Int64) -> Int64? {
        isTimetable ? rate(atMinuteOfWeek: Self.localMinuteOfWeek(epochSeconds)) : constant
    }

    /// Minutes since Monday 00:00 local time.
    public static func localMinuteOfWeek(_ epochSeconds: Int64) -> Int {
        var time = time_t(epochSeconds)
        var parts = tm()
        localtime_r(&time, &parts)
        return Int((parts.tm_wday + 6) % 7) * 1440 + Int(parts.tm_hour) * 60 + Int(parts.tm_min)
    }

    // MARK: Parsing

    /// Why a `--max-rate` text was refused; the description names the token to change.
    public struct ParseError: Error, Equatable, CustomStringConvertible {
        public let description: String
        /// Well written, but two entries set the rate at the same minute of the same day (the
        /// HTTP API answers 422 for this, 400 for a text that is not written as a rate or timetable).
        public var isConflict = false
    }

    static let dayNames = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"]
    static let displayDayNames = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"]
    static let longDayNames = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]

    /// Reads a rate (`10M`, `off`, `0`) or a timetable (see the type's documentation).
    public static func parse(_ text: String) throws(ParseError) -> RateTimetable {
        let trimmed = text.split(whereSeparator: { $0 == " " || $0 == "\t" || $0 == ";" }).map(String.init)
        guard !trimmed.isEmpty else { throw ParseError(description: "empty: give a rate (10M, off) or a timetable (\"08:00,512K 23:00,off\")") }
        let normalized = trimmed.joined(separator: " ")
        if trimmed.count == 1, !trimmed[0].contains(","), dayList(trimmed[0]) == nil {
            return RateTimetable(text: normalized, changes: [], constant: try rate(trimmed[0], in: trimmed[0]))
        }
        var days = Array(0..<7)
        var sawEntry = false
        var byMinute: [Int: Change] = [:]
        for token in trimmed {
            if let list = dayList(token) {
                days = list
                continue
            }
            guard let comma = token.firstIndex(of: ",") else {
                throw ParseError(description: "'\(token)' is neither an entry TIME,RATE (08:00,10M) nor a day list (Mon-Fri, Sat,Sun)")
            }
            var when = String(token[..<comma])
            let rateText = String(token[token.index(after: comma)...])
            var entryDays = days
            if let dash = when.firstIndex(of: "-") {  // rclone's per-entry day: Mon-08:00,512K
                let day = String(when[..<dash])
                guard let index = dayIndex(day) else {
                    throw ParseError(description: "'\(token)': '\(day)' is not a day (Mon, Tue, Wed, Thu, Fri, Sat, Sun)")
                }
                entryDays = [index]
                when = String(when[when.index(after: dash)...])
            }
            let minute = try minuteOfDay(when, in: token)
            let bytes = try rate(rateText, in: token)
            sawEntry = true
            for day in entryDays {
                let change = Change(minuteOfWeek: day * 1440 + minute, bytesPerSecond: bytes, entry: token)
                if let earlier = byMinute[change.minuteOfWeek] {
                    throw ParseError(description: "'\(earlier.entry)' and '\(token)' both set the rate on \(displayDayNames[day]) \(when)",
                                     isConflict: true)
                }
                byMinute[change.minuteOfWeek] = change
            }
        }
        guard sawEntry else { throw ParseError(description: "'\(normalized)' has days but no entry TIME,RATE (Mon-Fri 08:00,10M)") }
        return RateTimetable(text: normalized, changes: byMinute.values.sorted { $0.minuteOfWeek < $1.minuteOfWeek }, constant: nil)
    }

    private static func dayIndex(_ name: String) -> Int? {
        let name = name.lowercased()
        return dayNames.firstIndex(of: name) ?? longDayNames.firstIndex(of: name)
    }

    /// `Mon`, `Mon-Fri`, `Sat,Sun`, `Mon,Wed-Fri`, `Fri-Mon` (wrapping): the days, or nil when
    /// `token` is not a day list.
    private static func dayList(_ token: String) -> [Int]? {
        var days: [Int] = []
        for part in token.split(separator: ",", omittingEmptySubsequences: false) {
            let ends = part.split(separator: "-", omittingEmptySubsequences: false).map(String.init)
            guard ends.count <= 2, let first = dayIndex(ends[0]) else { return nil }
            guard ends.count == 2 else {
                days.append(first)
                continue
            }
            guard let last = dayIndex(ends[1]) else { return nil }
            var day = first
            while true {
                days.append(day)
                if day == last { break }
                day = (day + 1) % 7
            }
        }
        return days
    }

    private static func minuteOfDay(_ text: String, in token: String) throws(ParseError) -> Int {
        let parts = text.split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count == 2, (1...2).contains(parts[0].count), parts[1].count == 2,
              let hour = Int(parts[0]), let minute = Int(parts[1]), (0..<24).contains(hour), (0..<60).contains(minute)
        else { throw ParseError(description: "'\(token)': '\(text)' is not a time HH:MM (00:00 to 23:59)") }
        return hour * 60 + minute
    }

    private static func rate(_ text: String, in token: String) throws(ParseError) -> Int64? {
        if text.contains(":") {
            throw ParseError(description: "'\(token)': separate upload:download rates are not supported (one cap covers both directions); give one rate")
        }
        guard let rate = ByteRateText.parse(text) else {
            throw ParseError(description: "'\(token)': '\(text)' is not a rate (bytes per second with an optional K, M or G suffix: 512K, 10M; or off)")
        }
        return rate
    }
}
