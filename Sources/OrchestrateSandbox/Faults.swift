import OrchestrateJSON

/// Fault-injection switches, applied to transfer requests (tus PATCH, streaming PUT, file GET):
/// set at start-up with flags or at any time with `POST /_sandbox/faults`.
///
/// Rates are exact and deterministic (a rate of 0.25 fails every fourth request), so a test can
/// count on them; drops happen at pseudo-random offsets from a fixed seed.
struct Faults: Sendable {
    /// Mean body bytes between two dropped connections (0: never). Each drop happens after a
    /// number of bytes drawn uniformly from [0.5, 1.5] × this.
    var dropAfterBytes: Int64 = 0
    /// At most this many drops (-1: no limit).
    var maxDrops = -1
    /// Share of transfer requests answered 503 (with Retry-After) before reading the body.
    var rate503 = 0.0
    /// Share of transfer requests answered 429 with Retry-After.
    var rate429 = 0.0
    /// The Retry-After sent with 429/503, in seconds.
    var retryAfter = 1
    /// Send Retry-After as an HTTP date instead of seconds.
    var retryAfterAsDate = false
    /// Pause this long once a request has moved `stallAfterBytes` bytes (0: never) ...
    var stallMilliseconds = 0
    var stallAfterBytes: Int64 = 0
    /// ... at most this many times (-1: no limit).
    var maxStalls = 1
    var seed: UInt64 = 42

    init() {}

    init(json: JSONValue) {
        dropAfterBytes = json["drop_after_bytes"]?.intValue ?? 0
        maxDrops = Int(json["max_drops"]?.intValue ?? -1)
        rate503 = json["rate_503"]?.doubleValue ?? 0
        rate429 = json["rate_429"]?.doubleValue ?? 0
        retryAfter = Int(json["retry_after"]?.intValue ?? 1)
        retryAfterAsDate = json["retry_after_date"]?.boolValue ?? false
        stallMilliseconds = Int(json["stall_ms"]?.intValue ?? 0)
        stallAfterBytes = json["stall_after_bytes"]?.intValue ?? 0
        maxStalls = Int(json["max_stalls"]?.intValue ?? 1)
        seed = UInt64(json["seed"]?.intValue ?? 42)
    }

    var json: JSONValue {
        ["drop_after_bytes": .int(dropAfterBytes), "max_drops": .int(Int64(maxDrops)), "rate_503": .double(rate503),
         "rate_429": .double(rate429), "retry_after": .int(Int64(retryAfter)), "retry_after_date": .bool(retryAfterAsDate),
         "stall_ms": .int(Int64(stallMilliseconds)), "stall_after_bytes": .int(stallAfterBytes),
         "max_stalls": .int(Int64(maxStalls)), "seed": .int(Int64(seed))]
    }
}

/// The injector's running state: request counters, the bytes left before the next drop, and
/// what was injected so far (shown by `GET /_sandbox/state`, so tests can check faults happened).
struct FaultState: Sendable {
    var faults = Faults()
    var requests = 0
    var bytesUntilDrop: Int64 = 0
    var rng: UInt64 = 42
    var drops = 0
    var injected503 = 0
    var injected429 = 0
    var stalls = 0

    mutating func reset(_ faults: Faults) {
        self = FaultState()
        self.faults = faults
        rng = faults.seed | 1
        bytesUntilDrop = nextDropDistance()
    }

    /// What to answer before reading a transfer request's body, if anything.
    mutating func beforeRequest() -> Int? {
        let n = Double(requests)
        requests += 1
        func hit(_ rate: Double) -> Bool { rate > 0 && (n + 1) * rate - (n * rate).rounded(.down) >= 1 }
        if hit(faults.rate503) { injected503 += 1; return 503 }
        if hit(faults.rate429) { injected429 += 1; return 429 }
        return nil
    }

    /// How many of the next `count` bytes may pass before the connection is dropped; nil: all.
    mutating func allowance(_ count: Int64) -> Int64? {
        guard faults.dropAfterBytes > 0, faults.maxDrops < 0 || drops < faults.maxDrops else { return nil }
        if count < bytesUntilDrop { bytesUntilDrop -= count; return nil }
        let allowed = bytesUntilDrop
        drops += 1
        bytesUntilDrop = nextDropDistance()
        return allowed
    }

    /// True when a request that has moved `done` bytes should pause now.
    mutating func shouldStall(done: Int64, previous: Int64) -> Bool {
        guard faults.stallMilliseconds > 0, faults.maxStalls < 0 || stalls < faults.maxStalls else { return false }
        guard previous <= faults.stallAfterBytes, done > faults.stallAfterBytes else { return false }
        stalls += 1
        return true
    }

    private mutating func nextDropDistance() -> Int64 {
        // xorshift64*: reproducible offsets from the seed.
        rng ^= rng >> 12; rng ^= rng << 25; rng ^= rng >> 27
        let unit = Double((rng &* 2685821657736338717) >> 11) / Double(1 << 53)
        return max(1, Int64(Double(faults.dropAfterBytes) * (0.5 + unit)))
    }

    var json: JSONValue {
        ["faults": faults.json, "requests": .int(Int64(requests)), "drops": .int(Int64(drops)),
         "injected_503": .int(Int64(injected503)), "injected_429": .int(Int64(injected429)), "stalls": .int(Int64(stalls))]
    }
}
