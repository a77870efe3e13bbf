// `--max-rate` timetables (rclone's `--bwlimit` form): the parser against a table of timetables
// and the cap at given instants, refusals that name the entry, and a token bucket whose rate
// changes at a boundary while a transfer runs through the bandwidth extension.
import Foundation
import OrchestrateJSON
import OrchestratePluginHost
import OrchestrateTestSupport
import OrchestrateTokenBucket
import Testing

@Suite struct RateTimetableTests {
    static let days = ["Mon": 0, "Tue": 1, "Wed": 2, "Thu": 3, "Fri": 4, "Sat": 5, "Sun": 6]

    /// "Wed 12:00" → minutes since Monday 00:00.
    static func minute(_ text: String) -> Int {
        let parts = text.split(separator: " ")
        let clock = parts[1].split(separator: ":").map { Int($0)! }
        return days[String(parts[0])]! * 1440 + clock[0] * 60 + clock[1]
    }

    static let K: Int64 = 1 << 10, M: Int64 = 1 << 20

    /// (timetable, [(instant, expected cap; nil = none)])
    static let table: [(String, [(String, Int64?)])] = [
        ("10M", [("Mon 00:00", 10 * M), ("Sun 23:59", 10 * M)]),
        ("off", [("Wed 12:00", nil)]),
        ("0", [("Wed 12:00", nil)]),
        ("1.5G", [("Thu 03:00", 3 * 512 * M)]),
        ("08:00,512K 23:00,off", [
            ("Mon 07:59", nil), ("Mon 08:00", 512 * K), ("Tue 22:59", 512 * K), ("Tue 23:00", nil), ("Sun 07:00", nil),
        ]),
        ("Mon-Fri 08:00,10M 19:00,off", [
            ("Mon 07:59", nil), ("Mon 08:00", 10 * M), ("Wed 12:00", 10 * M), ("Fri 18:59", 10 * M), ("Fri 19:00", nil),
            ("Sat 12:00", nil), ("Sun 23:59", nil),
        ]),
        ("Mon-Fri 08:00,10M 19:00,off Sat,Sun 10:00,1M 18:00,off", [
            ("Sat 09:59", nil), ("Sat 10:00", M), ("Sun 17:59", M), ("Sun 18:00", nil), ("Tue 09:00", 10 * M),
        ]),
        // rclone's per-entry day prefix: one change a week each.
        ("Mon-08:00,512K Fri-18:00,off", [("Mon 07:59", nil), ("Mon 08:00", 512 * K), ("Thu 23:00", 512 * K), ("Sat 12:00", nil)]),
        // A wrapping day range, long lower-case names, `;` as separator, a one-digit hour.
        ("Fri-Sun 9:00,2M;20:00,off", [("Fri 09:00", 2 * M), ("Sun 19:59", 2 * M), ("Sun 20:00", nil), ("Wed 12:00", nil)]),
        ("monday,wednesday 12:00,64K 13:00,off", [("Mon 12:30", 64 * K), ("Tue 12:30", nil), ("Wed 12:30", 64 * K)]),
        // Entries before any day list apply every day; a day list applies to those after it.
        ("06:00,8M Sat 12:00,off", [("Sat 06:00", 8 * M), ("Sat 12:00", nil), ("Sun 05:59", nil), ("Sun 06:00", 8 * M)]),
        // An `off` in the middle of the week is an answer, not a gap (last week's latest would be 256K).
        ("07:00,1M 08:00,off 08:01,256K", [("Mon 07:59", M), ("Mon 08:00", nil), ("Mon 08:01", 256 * K), ("Mon 06:00", 256 * K)]),
    ]

    @Test(arguments: table)
    func theCapAtEachInstant(_ text: String, _ expectations: [(String, Int64?)]) throws {
        let timetable = try RateTimetable.parse(text)
        for (instant, cap) in expectations {
            #expect(timetable.rate(atMinuteOfWeek: Self.minute(instant)) == cap, "\(text) at \(instant)")
        }
    }

    /// (input, a fragment the refusal must contain: the entry to change and what is wrong)
    static let refusals: [(String, String)] = [
        ("", "empty"),
        ("fast", "'fast' is not a rate"),
        ("08:00,10X", "'08:00,10X': '10X' is not a rate"),
        ("25:00,1M", "'25:00,1M': '25:00' is not a time HH:MM"),
        ("08:60,1M", "'08:60' is not a time"),
        ("Mon-Fri", "has days but no entry"),
        ("Mon-Fri 08:00", "'08:00' is neither an entry TIME,RATE"),
        ("Funday 08:00,1M", "'Funday' is neither an entry"),
        ("Xyz-08:00,1M", "'Xyz' is not a day"),
        ("08:00,512K:1M", "'08:00,512K:1M': separate upload:download rates are not supported"),
        ("512K:1M", "separate upload:download rates are not supported"),
        ("08:00,1M 08:00,2M", "'08:00,1M' and '08:00,2M' both set the rate on Mon 08:00"),
        ("Mon-Fri 08:00,1M Fri 08:00,2M", "both set the rate on Fri 08:00"),
    ]

    @Test(arguments: refusals)
    func badTimetablesAreRefusedNamingTheEntry(_ text: String, _ fragment: String) {
        #expect(throws: RateTimetable.ParseError.self, "\(text)") { try RateTimetable.parse(text) }
        do {
            _ = try RateTimetable.parse(text)
        } catch {
            #expect(error.description.contains(fragment), "\(text): \(error.description)")
        }
    }

    @Test func aConstantRateAndATimetableAreTold() throws {
        #expect(try RateTimetable.parse(" 10M ").constantRate == .some(10 << 20))
        #expect(try RateTimetable.parse("off").constantRate == .some(nil))
        let timetable = try RateTimetable.parse("08:00,512K   23:00,off")
        #expect(timetable.isTimetable && timetable.constantRate == nil)
        #expect(timetable.text == "08:00,512K 23:00,off", "kept as written, spaces normalised")
    }

    /// The bucket switches at the boundary by the wall clock, settling what it owed at the old
    /// rate: 1 MiB/s until 08:00, then no cap, then 256 KiB/s from 08:01.
    @Test func theBucketFollowsItsTimetableAcrossBoundaries() throws {
        let clock = FakeClock()
        let wall = FakeWallClock(Self.monday(7, 59, 50))
        let bucket = TokenBucket(timetable: try RateTimetable.parse("07:00,1M 08:00,off 08:01,256K"),
                                 clock: clock.read, wallClock: wall.read)
        #expect(bucket.bytesPerSecond == 1 << 20)
        _ = bucket.reserve(bucket.burst)
        #expect(bucket.reserve(1 << 20) == 1_000_000_000, "1 MiB at 1 MiB/s")
        wall.set(Self.monday(8, 0, 0))
        #expect(bucket.reserve(64 << 20) == 0, "08:00: no cap, even with the debt of before")
        #expect(bucket.bytesPerSecond == nil)
        wall.set(Self.monday(8, 1, 0))
        _ = bucket.reserve(bucket.burst)
        #expect(bucket.burst == 64 << 10)
        #expect(bucket.reserve(256 << 10) == 1_000_000_000, "08:01: 256 KiB at 256 KiB/s is a second")
        bucket.follow(RateTimetable(bytesPerSecond: 512 << 10))
        clock.advance(nanoseconds: 1_000_000_000)
        // The 256 KiB owed was paid in that second at the new 512 KiB/s, and the other half refilled
        // the new burst (128 KiB): 512 KiB now owe 384 KiB, 0.75 s at 512 KiB/s.
        #expect(bucket.reserve(512 << 10) == 750_000_000, "follow (queue rate) replaces the timetable at once")
    }

    /// A boundary passes while a transfer runs: the C test plugin moves bytes through the
    /// bandwidth extension in 16 KiB chunks under a timetable of 256 KiB/s until 08:00 and
    /// 1 MiB/s from 08:00, with the wall clock starting at 07:59:57 (real time runs; only the
    /// starting point is injected). The rate achieved on each side of the boundary is within
    /// 10 % of its cap.
    @Test func aBoundaryChangesTheRateOfARunningTransfer() async throws {
        let start = Self.monday(7, 59, 57)
        let began = Date()
        let bucket = TokenBucket(timetable: try RateTimetable.parse("07:00,256K 08:00,1M"),
                                 wallClock: { start + Int64(Date().timeIntervalSince(began)) })
        let account = TimedAccount(bucket)
        let total = (256 << 10) * 3 + (1 << 20) * 3
        let result = try await runFixture("test.metered", ["bytes": .int(Int64(total)), "chunk": 16_384]) { $0.bandwidth = account }
        #expect(result.outputs?["bytes"] == .int(Int64(total)))
        let before = account.rate(from: 0.5, to: 2.9, since: began)
        let after = account.rate(from: 3.5, to: 5.5, since: began)
        #expect(abs(before / Double(256 << 10) - 1) < 0.1, "before 08:00: \(Int(before)) B/s, cap 256 KiB/s")
        #expect(abs(after / Double(1 << 20) - 1) < 0.1, "after 08:00: \(Int(after)) B/s, cap 1 MiB/s")
    }

    /// Local epoch seconds of Monday 23 November 2026 at `hour:minute:second`.
    static func monday(_ hour: Int, _ minute: Int, _ second: Int) -> Int64 {
        let calendar = Calendar(identifier: .gregorian)
        let date = calendar.date(from: DateComponents(timeZone: .current, year: 2026, month: 11, day: 23,
                                                      hour: hour, minute: minute, second: second))!
        return Int64(date.timeIntervalSince1970)
    }
}

final class FakeWallClock: @unchecked Sendable {
    private let lock = NSLock()
    private var now: Int64
    init(_ now: Int64) { self.now = now }
    func read() -> Int64 { lock.withLock { now } }
    func set(_ value: Int64) { lock.withLock { now = value } }
}

/// A bucket's grants with the instant each chunk was allowed to move (asked + wait).
final class TimedAccount: BandwidthAccount, @unchecked Sendable {
    private let bucket: TokenBucket
    private let lock = NSLock()
    private var grants: [(at: Date, bytes: Int64)] = []
    init(_ bucket: TokenBucket) { self.bucket = bucket }

    func reserve(_ bytes: Int64) -> Int64 {
        let wait = bucket.reserve(bytes)
        lock.withLock { grants.append((Date().addingTimeInterval(Double(wait) / 1e9), bytes)) }
        return wait
    }

    /// Bytes per second allowed between `from` and `to` seconds after `since`.
    func rate(from: Double, to: Double, since: Date) -> Double {
        let bytes = lock.withLock {
            grants.filter { (from..<to).contains($0.at.timeIntervalSince(since)) }.reduce(0) { $0 + $1.bytes }
        }
        return Double(bytes) / (to - from)
    }
}
