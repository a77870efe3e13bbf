import OrchestratePluginKit

/// The inputs every http step shares: extra headers, TLS, speed limits, redirects. Read once per
/// attempt and applied to each libcurl handle the step creates.
struct TransferOptions {
    var headers: [String: String] = [:]
    /// Skip TLS verification (a warning is logged once per attempt).
    var insecure = false
    /// A PEM bundle to trust instead of the system store (a private CA, a test certificate).
    var caFile: String?
    /// Abort when slower than `minSpeed` bytes/s for `minSpeedTime` seconds (a stalled peer).
    var minSpeed: Int = 0
    var minSpeedTime: Int = 30
    /// The step's `max_rate`: one bucket for all the requests of the attempt (the chunks of a
    /// tus upload share it), both directions. Waited on in libcurl's callbacks rather than
    /// CURLOPT_MAX_RECV_SPEED_LARGE, which lets the first second through uncapped.
    var rateCap: StepRateCap?
    var connectTimeout: Int = 30
    var followRedirects = true

    /// The JSON Schema properties of these inputs, spliced into each step's schema.
    static let schemaProperties = #"""
        "headers":{"type":"object","description":"extra request headers"},
        "insecure":{"type":"boolean","description":"skip TLS certificate verification (logged as a warning)"},
        "ca_file":{"type":"string","description":"PEM file of certificates to trust instead of the system store"},
        "min_speed":{"type":"integer","minimum":0,"description":"abort (timeout error) below this many bytes/s ..."},
        "min_speed_time":{"type":"integer","minimum":1,"description":"... for this many seconds (default 30)"},
        \#(StepRateCap.schemaProperty),
        "connect_timeout":{"type":"integer","minimum":1,"description":"seconds to establish a connection (default 30)"},
        "follow_redirects":{"type":"boolean","description":"follow 3xx redirects (default true)"}
        """#

    init(_ step: StepContext) throws(StepError) {
        headers = try step.optionalStringMap("headers") ?? [:]
        insecure = try step.bool("insecure", default: false)
        caFile = try step.optionalString("ca_file")
        minSpeed = Int(try step.optionalInt("min_speed") ?? 0)
        minSpeedTime = Int(try step.optionalInt("min_speed_time") ?? 30)
        rateCap = try StepRateCap.read(step)
        connectTimeout = Int(try step.optionalInt("connect_timeout") ?? 30)
        followRedirects = try step.bool("follow_redirects", default: true)
        if insecure {
            step.log(.warn, "TLS certificate verification is OFF for this step (insecure: true): the peer is not authenticated")
        }
    }
}
