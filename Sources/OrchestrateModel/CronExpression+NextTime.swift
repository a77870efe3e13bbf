// When a cron expression next fires in a time zone, daylight saving time included.
import Foundation

extension CronExpression {
    /// The first time after `time` (seconds since 1970, exclusive) at which the expression
    /// fires in `zone`, or nil if it never does again (`0 0 30 2 *`).
    ///
    /// Daylight saving time, as Vixie cron and cronie handle it:
    /// - a wall time that does not exist (02:30 on the spring-forward day in Europe/Berlin)
    ///   fires at the first instant after the gap (03:00) when the hour field is restricted, so
    ///   a daily job is not lost; a job with `*` hours just goes on with the next minute that exists;
    /// - a wall time that happens twice (01:30 or 02:30 on the fall-back day) fires once, at its
    ///   first occurrence, when the hour field is restricted; with `*` hours it fires at both
    ///   (every 15 minutes stays every 15 real minutes).
    ///
    ///     let berlin = TimeZone(identifier: "Europe/Berlin")!
    ///     try CronExpression.parse("30 2 * * *").nextTime(after: march28Noon, in: berlin)   // 2026-03-29 03:00 CEST
    public func nextTime(after time: Int64, in zone: TimeZone) -> Int64? {
        // Near a transition, wall times before the current one may still come (the repeated
        // hour of fall-back): scan from a few hours back and keep the earliest instant after `time`.
        let margin: Int64 = zone.hasTransition(near: time) ? 3 * 3_600 : 0
        var wall = zone.wallTime(at: time - margin)
        var best: Int64?
        var steps = 0
        while let next = nextWall(after: wall) {
            wall = next
            steps += 1
            if let best, next.utcSeconds > zone.wallTime(at: best).utcSeconds + margin { break }
            for instant in instants(of: next, in: zone) where instant > time {
                best = min(best ?? instant, instant)
            }
            if best != nil && margin == 0 { break }
            if steps > 100_000 { break }  // a bound for the impossible; nextWall has its own
        }
        return best
    }

    /// The instants at which wall time `wall` fires in `zone` (see `nextTime` for the DST rules).
    func instants(of wall: WallTime, in zone: TimeZone) -> [Int64] {
        let local = wall.utcSeconds
        // The offsets in force around that wall time: at most one transition within a day.
        let offsets = Set([zone.offset(at: local - 43_200), zone.offset(at: local + 43_200), zone.offset(at: local)])
        let found = offsets.map { local - Int64($0) }.filter { zone.offset(at: $0) == Int(local - $0) }.sorted()
        if found.isEmpty {
            // In a gap (spring forward): the first instant after it, for fixed-hour jobs.
            // The offset grows across a gap, so `local - larger` is before it and `local - smaller` after.
            guard hourRestricted, let larger = offsets.max(), let smaller = offsets.min() else { return [] }
            return [zone.transition(between: local - Int64(larger), and: local - Int64(smaller))]
        }
        return hourRestricted ? [found[0]] : found
    }

    /// The next matching wall-clock minute strictly after `wall`, or nil within eight years
    /// (enough for 29 February on a weekday).
    func nextWall(after wall: WallTime) -> WallTime? {
        var w = WallTime(utcSeconds: wall.utcSeconds + 60)
        let lastYear = wall.year + 8
        while w.year <= lastYear {
            if months & (1 << UInt16(w.month)) == 0 {
                w = WallTime(year: w.month == 12 ? w.year + 1 : w.year, month: w.month % 12 + 1, day: 1, hour: 0, minute: 0)
            } else if !dayMatches(year: w.year, month: w.month, day: w.day) {
                w = WallTime(utcSeconds: WallTime(year: w.year, month: w.month, day: w.day, hour: 0, minute: 0).utcSeconds + 86_400)
            } else if hours & (1 << UInt32(w.hour)) == 0 {
                w = WallTime(utcSeconds: WallTime(year: w.year, month: w.month, day: w.day, hour: w.hour, minute: 0).utcSeconds + 3_600)
            } else if minutes & (1 << UInt64(w.minute)) == 0 {
                w = WallTime(utcSeconds: w.utcSeconds + 60)
            } else {
                return w
            }
        }
        return nil
    }

    /// Whether the expression can ever fire (`0 0 31 4 *` cannot: April has 30 days).
    public var canFire: Bool { nextWall(after: WallTime(year: 2000, month: 1, day: 1, hour: 0, minute: 0)) != nil }
}

extension TimeZone {
    /// The wall-clock minute at `time` in this zone.
    public func wallTime(at time: Int64) -> WallTime {
        WallTime(utcSeconds: time + Int64(offset(at: time)))
    }

    func offset(at time: Int64) -> Int { secondsFromGMT(for: Date(timeIntervalSince1970: Double(time))) }

    func hasTransition(near time: Int64) -> Bool {
        guard let next = nextDaylightSavingTimeTransition(after: Date(timeIntervalSince1970: Double(time - 86_400))) else {
            return false
        }
        return next.timeIntervalSince1970 < Double(time + 86_400)
    }

    /// The first second in `low...high` with the offset in force at `high` (`low` has the one before).
    func transition(between low: Int64, and high: Int64) -> Int64 {
        let target = offset(at: high)
        var (lo, hi) = (low, high)
        while lo < hi {
            let mid = lo + (hi - lo) / 2
            if offset(at: mid) == target { hi = mid } else { lo = mid + 1 }
        }
        return lo
    }
}
