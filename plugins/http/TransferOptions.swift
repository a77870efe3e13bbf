import OrchestratePluginKit

/// The inputs every http step shares (extra headers, TLS, speed limits, redirects), declared
/// once; each step holds them as `var transfer = TransferInputs()`.
struct TransferInputs: StepInputs {
    @Input(help: "extra request headers") var headers: [String: String] = [:]
    @Input(help: "skip TLS certificate verification (logged as a warning)") var insecure = false
    @Input(help: "PEM file of certificates to trust instead of the system store") var caFile: String?
    @Input(help: "abort (timeout error) below this many bytes/s ... (the default 1 ends a peer that went silent; 0: never)", minimum: 0)
    var minSpeed = 1
    @Input(help: "... for this many seconds", minimum: 1) var minSpeedTime = 60
    var rate = RateCapInputs()
    @Input(help: "seconds to establish a connection", minimum: 1) var connectTimeout = 30
    @Input(help: "follow 3xx redirects") var followRedirects = true
}

/// `TransferInputs` made ready for libcurl: read once per attempt and applied to each handle the
/// step creates.
struct TransferOptions {
    var headers: [String: String]
    /// Skip TLS verification (a warning is logged once per attempt).
    var insecure: Bool
    /// A PEM bundle to trust instead of the system store (a private CA, a test certificate).
    var caFile: String?
    /// Abort when slower than `minSpeed` bytes/s for `minSpeedTime` seconds (a stalled peer).
    var minSpeed: Int
    var minSpeedTime: Int
    /// The step's `max_rate`: one bucket for all the requests of the attempt (the chunks of a
    /// tus upload share it), both directions. Waited on in libcurl's callbacks rather than
    /// CURLOPT_MAX_RECV_SPEED_LARGE, which lets the first second through uncapped.
    var rateCap: StepRateCap?
    var connectTimeout: Int
    var followRedirects: Bool

    init(_ inputs: TransferInputs, step: StepContext) throws(StepError) {
        headers = inputs.headers
        insecure = inputs.insecure
        caFile = inputs.caFile
        minSpeed = inputs.minSpeed
        minSpeedTime = inputs.minSpeedTime
        rateCap = try StepRateCap.make(inputs.rate, step: step)
        connectTimeout = inputs.connectTimeout
        followRedirects = inputs.followRedirects
        if insecure {
            step.log(.warn, "TLS certificate verification is OFF for this step (insecure: true): the peer is not authenticated")
        }
    }
}
