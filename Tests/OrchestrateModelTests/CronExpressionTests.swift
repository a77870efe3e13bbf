// Cron expressions: parsing, and their next times in UTC and in zones with daylight saving time.
import Foundation
import OrchestrateModel
import Testing

/// "2026-11-23 10:00" or "2026-11-23 10:00:30", read as UTC, in seconds since 1970.
private func utc(_ text: String) -> Int64 {
    let parts = text.split(whereSeparator: { $0 == "-" || $0 == " " || $0 == ":" }).map { Int($0)! }
    return WallTime(year: parts[0], month: parts[1], day: parts[2], hour: parts[3], minute: parts[4]).utcSeconds
        + Int64(parts.count > 5 ? parts[5] : 0)
}

private func utcText(_ time: Int64) -> String { WallTime(utcSeconds: time).description }

struct NextTimeCase: Sendable, CustomTestStringConvertible {
    let cron: String
    let zone: String
    /// UTC.
    let after: String
    /// The following fire times, each after the one before, in UTC.
    let next: [String]
    var testDescription: String { "\(cron) in \(zone) after \(after)" }
}

@Suite("Cron expressions")
struct CronExpressionTests {
    static let cases: [NextTimeCase] = [
        // 2026-11-23 is a Monday.
        .init(cron: "* * * * *", zone: "UTC", after: "2026-11-23 10:00:30", next: ["2026-11-23 10:01", "2026-11-23 10:02"]),
        .init(cron: "*/15 * * * *", zone: "UTC", after: "2026-11-23 10:01",
              next: ["2026-11-23 10:15", "2026-11-23 10:30", "2026-11-23 10:45", "2026-11-23 11:00"]),
        .init(cron: "5-10/2 * * * *", zone: "UTC", after: "2026-11-23 10:00",
              next: ["2026-11-23 10:05", "2026-11-23 10:07", "2026-11-23 10:09", "2026-11-23 11:05"]),
        .init(cron: "0 */6 * * *", zone: "UTC", after: "2026-11-23 10:00",
              next: ["2026-11-23 12:00", "2026-11-23 18:00", "2026-11-24 00:00"]),
        .init(cron: "30 4/6 * * *", zone: "UTC", after: "2026-11-23 10:00",
              next: ["2026-11-23 10:30", "2026-11-23 16:30", "2026-11-23 22:30", "2026-11-24 04:30"]),
        .init(cron: "0 2 * * *", zone: "UTC", after: "2026-11-23 02:00", next: ["2026-11-24 02:00"]),
        .init(cron: "30 8 * * MON-FRI", zone: "UTC", after: "2026-11-27 09:00", next: ["2026-11-30 08:30", "2026-12-01 08:30"]),
        .init(cron: "0 0 * * 7", zone: "UTC", after: "2026-11-23 10:00", next: ["2026-11-29 00:00", "2026-12-06 00:00"]),
        .init(cron: "0 9 * jan,JUL *", zone: "UTC", after: "2026-11-23 10:00", next: ["2027-01-01 09:00", "2027-01-02 09:00"]),
        .init(cron: "15 14 1 * *", zone: "UTC", after: "2026-11-23 10:00", next: ["2026-12-01 14:15", "2027-01-01 14:15"]),
        // Day of month and day of week both restricted: either matches.
        .init(cron: "0 0 13 * FRI", zone: "UTC", after: "2026-11-23 10:00",
              next: ["2026-11-27 00:00", "2026-12-04 00:00", "2026-12-11 00:00", "2026-12-13 00:00", "2026-12-18 00:00"]),
        .init(cron: "0 12 29 2 *", zone: "UTC", after: "2026-11-23 10:00", next: ["2028-02-29 12:00", "2032-02-29 12:00"]),
        .init(cron: "@yearly", zone: "UTC", after: "2026-11-23 10:00", next: ["2027-01-01 00:00", "2028-01-01 00:00"]),
        .init(cron: "@annually", zone: "UTC", after: "2026-11-23 10:00", next: ["2027-01-01 00:00"]),
        .init(cron: "@monthly", zone: "UTC", after: "2026-11-23 10:00", next: ["2026-12-01 00:00", "2027-01-01 00:00"]),
        .init(cron: "@weekly", zone: "UTC", after: "2026-11-23 10:00", next: ["2026-11-29 00:00", "2026-12-06 00:00"]),
        .init(cron: "@daily", zone: "UTC", after: "2026-11-23 10:00", next: ["2026-11-24 00:00"]),
        .init(cron: "@midnight", zone: "UTC", after: "2026-11-23 10:00", next: ["2026-11-24 00:00"]),
        .init(cron: "@hourly", zone: "UTC", after: "2026-11-23 10:00:30", next: ["2026-11-23 11:00", "2026-11-23 12:00"]),
        // A zone without DST: Tokyo is UTC+9.
        .init(cron: "0 2 * * *", zone: "Asia/Tokyo", after: "2026-11-23 10:00", next: ["2026-11-23 17:00", "2026-11-24 17:00"]),

        // Europe/Berlin springs forward on 2026-03-29: 02:00 CET (01:00 UTC) becomes 03:00 CEST.
        // A fixed time in the gap fires when the gap ends, once; the next day is normal again.
        .init(cron: "30 2 * * *", zone: "Europe/Berlin", after: "2026-03-28 11:00",
              next: ["2026-03-29 01:00", "2026-03-30 00:30"]),
        .init(cron: "0 2 * * *", zone: "Europe/Berlin", after: "2026-03-28 11:00", next: ["2026-03-29 01:00", "2026-03-30 00:00"]),
        .init(cron: "*/30 2 * * *", zone: "Europe/Berlin", after: "2026-03-28 11:00", next: ["2026-03-29 01:00", "2026-03-30 00:00"]),
        // Every 30 minutes just goes on with the minutes that exist.
        .init(cron: "*/30 * * * *", zone: "Europe/Berlin", after: "2026-03-29 00:15",
              next: ["2026-03-29 00:30", "2026-03-29 01:00", "2026-03-29 01:30"]),
        // Europe/Berlin falls back on 2026-10-25: 03:00 CEST (01:00 UTC) becomes 02:00 CET, so
        // 02:00-02:59 happens twice. A fixed time fires at its first occurrence only.
        .init(cron: "30 2 * * *", zone: "Europe/Berlin", after: "2026-10-24 10:00", next: ["2026-10-25 00:30", "2026-10-26 01:30"]),
        // Every 30 minutes stays every 30 real minutes through the repeated hour…
        .init(cron: "*/30 * * * *", zone: "Europe/Berlin", after: "2026-10-24 23:45",
              next: ["2026-10-25 00:00", "2026-10-25 00:30", "2026-10-25 01:00", "2026-10-25 01:30", "2026-10-25 02:00"]),
        // …also from inside its first pass (02:50 CEST: next is 02:00 CET, an earlier wall time).
        .init(cron: "*/30 * * * *", zone: "Europe/Berlin", after: "2026-10-25 00:50", next: ["2026-10-25 01:00"]),
        // America/New_York: 01:30 happens twice on 2026-11-01 (EDT, then EST); 02:30 not at all on 2026-03-08.
        .init(cron: "30 1 * * *", zone: "America/New_York", after: "2026-10-31 16:00", next: ["2026-11-01 05:30", "2026-11-02 06:30"]),
        .init(cron: "30 2 * * *", zone: "America/New_York", after: "2026-03-07 17:00", next: ["2026-03-08 07:00", "2026-03-09 06:30"]),
    ]

    @Test("next times", arguments: cases)
    func nextTimes(_ c: NextTimeCase) throws {
        let cron = try CronExpression.parse(c.cron)
        let zone = try #require(TimeZone(identifier: c.zone))
        var after = utc(c.after)
        var got: [String] = []
        for _ in c.next {
            guard let next = cron.nextTime(after: after, in: zone) else { break }
            got.append(utcText(next))
            after = next
        }
        #expect(got == c.next)
    }

    @Test("a date that never comes")
    func neverFires() throws {
        let cron = try CronExpression.parse("0 0 30 2 *")
        #expect(!cron.canFire)
        #expect(cron.nextTime(after: utc("2026-01-01 00:00"), in: TimeZone(identifier: "UTC")!) == nil)
        #expect(try CronExpression.parse("0 0 31 * *").canFire)
    }

    @Test("refused expressions say what is wrong and where", arguments: [
        ("61 * * * *", "61 is out of range for the minute field (0-59)", 0),
        ("0 25 * * *", "25 is out of range for the hour field (0-23)", 2),
        ("* * * *", "a cron expression has 5 fields", 0),
        ("0 0 * * * *", "seconds are not supported", 0),
        ("*/0 * * * *", "invalid step '0' in the minute field", 2),
        ("0 0 * FOO *", "invalid month 'FOO'", 6),
        ("0 0 * * MON-", "invalid day of week ''", 12),
        ("5-1 * * * *", "the range '5-1' in the minute field runs backwards", 0),
        ("0 0 1,,2 * *", "empty entry in the day of month field", 6),
        ("@reboot", "unknown cron alias '@reboot'", 0),
        ("0 0 L * *", "invalid day of month 'L'", 4),
    ])
    func refused(_ text: String, _ message: String, _ offset: Int) {
        do {
            _ = try CronExpression.parse(text)
            Issue.record("'\(text)' was accepted")
        } catch {
            #expect(error.message.contains(message), "\(error.message)")
            #expect(error.offset == offset)
        }
    }
}
