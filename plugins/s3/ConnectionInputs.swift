#if canImport(Glibc)
import Glibc
#endif
import OrchestrateCurl
import OrchestratePluginKit
import OrchestrateS3Auth

/// Where the bucket is and who signs: declared once for every s3 step.
struct ConnectionInputs: StepInputs {
    @Input(help: "the bucket", minLength: 1) var bucket: String
    @Input(help: "the bucket's region (default: AWS_REGION, AWS_DEFAULT_REGION, the profile's region, us-east-1)") var region: String?
    @Input(help: "an S3-compatible service's URL, http(s)://host[:port] (default: AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL, the profile's endpoint_url, else AWS)")
    var endpoint: String?
    @Input(help: "auto: virtual-hosted on AWS when the bucket name allows it, path-style on other endpoints")
    var addressingStyle = Endpoint.AddressingStyle.auto
    @Input(help: "a profile of ~/.aws/credentials and ~/.aws/config (default: AWS_PROFILE, else the environment's keys)") var profile: String?
    @Input(help: "access key id (with secret_access_key; default: the environment or the profile)") var accessKeyId: String?
    @Input(help: "secret access key (a secret: from the workflow's secrets)") var secretAccessKey: String?
    @Input(help: "session token of temporary credentials (a secret)") var sessionToken: String?
    @Input(help: "PEM file of certificates to trust instead of the system store") var caFile: String?
    @Input(help: "seconds to establish a connection", minimum: 1) var connectTimeout = 30
    @Input(help: "seconds without a byte moving before a connection counts as dead", minimum: 1) var ioTimeout = 60
    var rate = RateCapInputs()
}

/// What each request needs besides its own method, key and body.
struct ConnectionOptions {
    var caFile: String?
    var connectTimeout: Int
    var ioTimeout: Int
    /// The step's `max_rate`: one bucket for all its requests, both directions.
    var rateCap: StepRateCap?
}

/// The bucket, its endpoint, the signer and keys, and the pool that runs the requests: a
/// step's S3 client.
final class S3Client {
    let step: StepContext
    let bucket: String
    let endpoint: Endpoint
    let signer: SigV4
    private let credentials: AWSCredentials
    let options: ConnectionOptions
    let pool: CurlPool
    let errorContext: S3Errors.Context

    init(_ inputs: ConnectionInputs, step: StepContext) throws(StepError) {
        self.step = step
        var environment: [String: String] = [:]
        for name in ["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_REGION", "AWS_DEFAULT_REGION",
                     "AWS_SHARED_CREDENTIALS_FILE", "AWS_CONFIG_FILE", "HOME", "AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL",
                     "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS"]
        {
            if let value = getenv(name) { environment[name] = String(cString: value) }
        }
        let chain = CredentialChain(environment: environment)
        let resolved: (credentials: AWSCredentials, region: String)
        do {
            resolved = try chain.resolve(.init(
                accessKeyID: inputs.accessKeyId, secretAccessKey: inputs.secretAccessKey, sessionToken: inputs.sessionToken,
                profile: inputs.profile, region: inputs.region))
        } catch {
            throw .invalidInput(error.description, code: "no_credentials")
        }
        try Endpoint.checkBucket(inputs.bucket)
        bucket = inputs.bucket
        credentials = resolved.credentials
        // No `endpoint`: the one the AWS SDKs would use (the environment, the profile), else AWS.
        let configured = inputs.endpoint == nil ? chain.endpoint(profile: inputs.profile) : nil
        do {
            endpoint = try Endpoint(inputs.endpoint ?? configured?.url, region: resolved.region, style: inputs.addressingStyle, bucket: inputs.bucket)
        } catch {
            guard let configured else { throw error }
            throw .invalidInput("\(error.message) (from \(configured.source))", code: error.code ?? "bad_endpoint")
        }
        if let configured { step.log(.info, "endpoint \(endpoint.display) (from \(configured.source))") }
        signer = SigV4(region: resolved.region)
        options = ConnectionOptions(caFile: inputs.caFile, connectTimeout: inputs.connectTimeout, ioTimeout: inputs.ioTimeout,
                                    rateCap: try StepRateCap.make(inputs.rate, step: step))
        pool = try CurlPool(step: step)
        errorContext = S3Errors.Context(bucket: bucket, key: nil, accessKeyID: credentials.accessKeyID,
                                        credentialsSource: credentials.source, endpoint: endpoint.display)
    }

    /// A signed exchange on the bucket (`key` nil: the bucket itself).
    func exchange(_ method: String, key: String?, query: [(name: String, value: String)] = [], headers: [(name: String, value: String)] = [],
                  body: CurlBody = .none, payloadHash: String = SigV4.emptyPayloadHash, label: String, tag: Int = 0,
                  cancellable: Bool = true) throws(StepError) -> Exchange
    {
        let (host, path) = endpoint.location(bucket: bucket, key: key)
        let signed = signer.sign(.init(method: method, host: host, path: path, query: query, headers: headers, payloadHash: payloadHash),
                                 credentials: credentials, time: Int(time(nil)))
        let url = endpoint.scheme + "://" + host + signed.encodedPath + (signed.encodedQuery.isEmpty ? "" : "?" + signed.encodedQuery)
        return try Exchange(step: step, label: label, tag: tag, method: method, url: url, headers: signed.headers, body: body, options: options,
                         cancellable: cancellable)
    }

    /// Sends one request; a status outside `accept` is an error that says what to do.
    func send(_ method: String, key: String?, query: [(name: String, value: String)] = [], headers: [(name: String, value: String)] = [],
              body: CurlBody = .none, payloadHash: String = SigV4.emptyPayloadHash, label: String,
              accept: Set<Int> = [200, 204, 206], cancellable: Bool = true) throws(StepError) -> Exchange.Response
    {
        let response = try pool.run(try exchange(method, key: key, query: query, headers: headers, body: body, payloadHash: payloadHash,
                                                 label: label, cancellable: cancellable))
        guard accept.contains(response.status) else { throw error(response, label: label, key: key) }
        return response
    }

    /// HEAD of an object, with its S3 checksum when the server keeps one (`x-amz-checksum-mode`).
    /// A HEAD's error has no body (no S3 error code): on a failure, a GET of its first byte
    /// fetches the error document, so the error can say what is wrong.
    func head(_ key: String) throws(StepError) -> Exchange.Response {
        let label = "HEAD \(uri(key))"
        let response = try send("HEAD", key: key, headers: [Self.checksumMode], label: label, accept: Set(100 ... 599))
        if response.status == 200 { return response }
        // Throws the error the document describes; a GET that works (a race) leaves the HEAD's.
        _ = try send("GET", key: key, headers: [("Range", "bytes=0-0")], label: label, accept: [200, 206, 416])
        throw error(response, label: label, key: key)
    }

    func error(_ response: Exchange.Response, label: String, key: String?) -> StepError {
        var context = errorContext
        context.key = key
        return S3Errors.status(response, label: label, context: context)
    }

    /// Asks a HEAD or GET for the object's S3 checksum headers (ignored where there are none).
    static let checksumMode = (name: "x-amz-checksum-mode", value: "ENABLED")

    /// `s3://bucket/key`, for messages and outputs.
    func uri(_ key: String) -> String { "s3://\(bucket)/\(key)" }
}
