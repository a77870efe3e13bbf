import CCurl
import OrchestratePluginKit
import OrchestrateJSON

/// `http.request`: one HTTP request with a JSON, text or form body; the response parsed as JSON
/// when it is JSON. Unexpected statuses fail the step (retryable for 408/429/5xx).
struct RequestStep: StepDefinition {
    static let id = "http.request"
    static let version = "1.0.0"
    static let summary = "One HTTP request; JSON in and out, statuses checked, Retry-After honoured."
    static let documentation = """
        Sends `method` to `url` (with `query` appended) and a body from `json`, `body` or `form`.
        Succeeds when the status is in `expect_status` (default: any 2xx). 408, 429 and 5xx fail \
        as retryable with the server's Retry-After as the retry delay; other statuses fail as \
        permanent with the server's message. The step's idempotency_key is sent as Idempotency-Key.
        """
    struct Inputs: StepInputs {
        @Input(help: "GET, POST, PUT, PATCH, DELETE, HEAD, ...") var method = "GET"
        @Input(help: "where to send it", minLength: 1) var url: String
        @Input(help: "query parameters, URL-encoded and appended") var query: [String: JSONValue]?
        @Input(help: "a JSON body (sets Content-Type: application/json)") var json: JSONValue?
        @Input(help: "a text body") var body: String?
        @Input(help: "an application/x-www-form-urlencoded body") var form: [String: JSONValue]?
        @Input(help: "statuses that mean success (default: 2xx)") var expectStatus: [Int64]?
        @Input(help: "bytes of response body kept", minimum: 0) var maxBody: Int64 = 1 << 20
        var transfer = TransferInputs()
    }
    static let inputSchema = Inputs.schemaText
    struct Outputs: StepOutputs {
        @Output(help: "the HTTP status of the response") var status: Int
        @Output(help: "response headers, names lower-case (a header sent several times: its values joined with \", \")")
        var headers: [String: String]
        @Output(help: "the body parsed as JSON, or null", nullable: true) var json: JSONValue?
        @Output(help: "the body as text (capped at max_body)") var body: String
        @Output(help: "the Location header, or null", nullable: true) var location: String?
        @Output(name: "location_url", help: "the Location header made absolute against the request URL, or null", nullable: true)
        var locationURL: String?
    }
    static let outputSchema = Outputs.schemaText

    static func run(_ step: StepContext) throws {
        let inputs = try step.read(Inputs.self)
        let options = try TransferOptions(inputs.transfer, step: step)
        let method = inputs.method.uppercased()
        var url = inputs.url
        if let query = inputs.query, !query.isEmpty {
            url += (url.contains("?") ? "&" : "?") + formEncode(query)
        }
        var headers = options.headers
        var body = Transfer.Body.none
        let bodies = [inputs.$json.given, inputs.$body.given, inputs.$form.given].filter { $0 }
        if bodies.count > 1 {
            throw StepError.invalidInput("give at most one of \(inputs.$json.name), \(inputs.$body.name) and \(inputs.$form.name)")
        }
        if let json = inputs.json {
            body = .bytes(Array(json.jsonText.utf8))
            headers.setIfAbsent("Content-Type", "application/json")
        } else if let text = inputs.body {
            body = .bytes(Array(text.utf8))
        } else if let form = inputs.form {
            body = .bytes(Array(formEncode(form).utf8))
            headers.setIfAbsent("Content-Type", "application/x-www-form-urlencoded")
        }
        headers.setIfAbsent("Accept", "application/json, */*;q=0.5")
        if let key = step.idempotencyKey { headers["Idempotency-Key"] = key }
        let expected = inputs.expectStatus.map { Set($0.map(Int.init)) }
        let cap = Int(inputs.maxBody)

        let transfer = try Transfer(step: step, method: method, url: url, headers: headers, body: body,
                                    options: options, memoryCap: cap, decodeContent: true)
        let response = try transfer.perform()
        let ok = expected.map { $0.contains(response.status) } ?? (200..<300).contains(response.status)
        guard ok else { throw HTTPErrors.status(response, method: method, url: url) }
        let isJSON = response.header("content-type")?.lowercased().contains("json") ?? false
        if isJSON && response.bodyTruncated {
            // Half a JSON document cannot be parsed; the rest was not read (memory stays bounded).
            throw StepError.permanent("\(method) \(url): the JSON response is larger than max_body (\(cap) bytes); raise max_body to accept it",
                                      code: "body_too_large")
        }
        step.log(.info, "\(method) \(url) → \(response.status)")
        var outputs = Outputs()
        outputs.status = response.status
        outputs.headers = [:]
        for (name, value) in response.headers {
            outputs.headers[name] = outputs.headers[name].map { $0 + ", " + value } ?? value
        }
        let parsed = (isJSON || !response.body.isEmpty) ? (try? JSONValue(parsing: response.body)) : nil
        outputs.json = response.bodyTruncated ? nil : parsed
        outputs.body = String(decoding: response.body, as: UTF8.self)
        outputs.location = response.header("location")
        outputs.locationURL = response.header("location").map { URLs.resolve($0, against: url) }
        try step.setOutputs(outputs)
    }

    /// `k=v&k2=v2`, percent-encoded by libcurl; non-string values in their JSON form.
    static func formEncode(_ fields: [String: JSONValue]) -> String {
        fields.sorted { $0.key < $1.key }.map { key, value in
            let text = value.stringValue ?? value.jsonText
            return escape(key) + "=" + escape(text)
        }.joined(separator: "&")
    }

    static func escape(_ text: String) -> String {
        guard let escaped = curl_easy_escape(nil, text, Int32(text.utf8.count)) else { return text }
        defer { curl_free(escaped) }
        return String(cString: escaped)
    }
}

extension [String: String] {
    /// Sets a header unless one of that name (case-insensitively) is there already.
    mutating func setIfAbsent(_ name: String, _ value: String) {
        if keys.first(where: { $0.lowercased() == name.lowercased() }) == nil { self[name] = value }
    }
}
