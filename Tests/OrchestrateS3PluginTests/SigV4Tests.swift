import Foundation
import OrchestrateS3Auth
import OrchestrateTestSupport
import Testing

/// The s3 plugin's Signature Version 4 signer against botocore's (the AWS CLI's own signer, run
/// from the test venv), field by field, and against the worked examples of AWS's S3 SigV4
/// documentation ("Examples: Signature Calculations", example credentials, 20130524).
@Suite struct SigV4Tests {
    static let exampleKeys = AWSCredentials(accessKeyID: "AKIAIOSFODNN7EXAMPLE",
                                            secretAccessKey: "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", source: "test")
    /// 2013-05-24T00:00:00Z, the examples' date.
    static let exampleTime = 1_369_353_600

    struct Case {
        var request: SigV4.Request
        var scheme = "http"
        var credentials = SigV4Tests.exampleKeys
        var region = "us-east-1"
        var time = SigV4Tests.exampleTime
    }

    static let sha = "44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072"  // SHA-256 of "Welcome to Amazon S3."

    static var cases: [Case] {
        let host = "examplebucket.s3.amazonaws.com"
        let local = "127.0.0.1:9000"
        let token = AWSCredentials(accessKeyID: "ASIAEXAMPLE", secretAccessKey: "secret/with+plus=", sessionToken: "FQoGZXIvYXdzE+/token==",
                                   source: "test")
        return [
            Case(request: .init(method: "GET", host: host, path: "/test.txt", headers: [("Range", "bytes=0-9")], payloadHash: SigV4.emptyPayloadHash)),
            Case(request: .init(method: "GET", host: host, path: "/", query: [("lifecycle", "")], payloadHash: SigV4.emptyPayloadHash)),
            Case(request: .init(method: "GET", host: host, path: "/", query: [("max-keys", "2"), ("prefix", "J")], payloadHash: SigV4.emptyPayloadHash)),
            // Odd keys: spaces, unicode, + = ~ / and characters that must be escaped.
            Case(request: .init(method: "PUT", host: local, path: "/bucket/dir/a key+with=odd~chars/été 日本.bin",
                                headers: [("Content-MD5", "1B2M2Y8AsgTpgAmY7PhCfg=="), ("x-amz-meta-sha256", sha)], payloadHash: sha)),
            Case(request: .init(method: "PUT", host: local, path: "/bucket/!$&'()*,;:@[]#?%.txt", payloadHash: SigV4.unsignedPayload)),
            Case(request: .init(method: "GET", host: local, path: "/bucket//double//slash/./../x", payloadHash: SigV4.emptyPayloadHash)),
            // Query strings that need sorting and encoding.
            Case(request: .init(method: "PUT", host: local, path: "/bucket/big file",
                                query: [("uploadId", "2~abc/def+ghi=="), ("partNumber", "10")], payloadHash: sha)),
            Case(request: .init(method: "GET", host: local, path: "/bucket",
                                query: [("prefix", "photos/2024 été/"), ("list-type", "2"), ("delimiter", "/"), ("continuation-token", "a+b=c&d")],
                                payloadHash: SigV4.emptyPayloadHash)),
            Case(request: .init(method: "POST", host: local, path: "/bucket/k", query: [("uploads", "")], payloadHash: SigV4.emptyPayloadHash)),
            // A session token, header values with runs of spaces, https with UNSIGNED-PAYLOAD.
            Case(request: .init(method: "PUT", host: "bucket.s3.eu-west-3.amazonaws.com", path: "/x y",
                                headers: [("x-amz-meta-note", "  two   spaces  here "), ("Content-Type", "application/octet-stream")],
                                payloadHash: SigV4.unsignedPayload),
                 scheme: "https", credentials: token, region: "eu-west-3", time: 1_764_201_600),
            Case(request: .init(method: "DELETE", host: local, path: "/bucket/k", query: [("uploadId", "id")], payloadHash: SigV4.emptyPayloadHash),
                 credentials: token, region: "garage"),
        ]
    }

    /// Canonical request, string to sign, signature and URL path equal botocore's for every case.
    @Test func matchesBotocore() throws {
        let cases = Self.cases
        let input: [[String: Any]] = cases.map { c in
            [
                "method": c.request.method, "scheme": c.scheme, "host": c.request.host, "path": c.request.path,
                "query": c.request.query.map { [$0.name, $0.value] }, "headers": c.request.headers.map { [$0.name, $0.value] },
                "payload_hash": c.request.payloadHash, "access_key": c.credentials.accessKeyID, "secret_key": c.credentials.secretAccessKey,
                "token": c.credentials.sessionToken as Any, "region": c.region, "amz_date": SigV4.timestamps(c.time).amzDate,
            ]
        }
        let dir = TemporaryDirectory("sigv4")
        let file = dir.file("cases.json")
        try JSONSerialization.data(withJSONObject: input).write(to: file)
        let result = try PythonVenv.run("sigv4_reference.py", [file.path])
        #expect(result.status == 0, "\(result.stderr)")
        let reference = try #require(try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [[String: String]])
        try #require(reference.count == cases.count)
        for (c, expected) in zip(cases, reference) {
            let signed = SigV4(region: c.region).sign(c.request, credentials: c.credentials, time: c.time)
            #expect(signed.encodedPath == expected["encoded_path"], "\(c.request.path)")
            #expect(signed.canonicalRequest == expected["canonical_request"], "\(c.request.path)")
            #expect(signed.stringToSign == expected["string_to_sign"], "\(c.request.path)")
            #expect(signed.signature == expected["signature"], "\(c.request.path)")
        }
    }

    /// AWS's published S3 examples: GET Object with a Range, GET Bucket lifecycle, and
    /// GET Bucket (list objects) with max-keys and prefix.
    @Test func awsDocumentationExamples() {
        let signer = SigV4(region: "us-east-1")
        let get = signer.sign(Self.cases[0].request, credentials: Self.exampleKeys, time: Self.exampleTime)
        #expect(get.canonicalRequest == """
            GET
            /test.txt

            host:examplebucket.s3.amazonaws.com
            range:bytes=0-9
            x-amz-content-sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855
            x-amz-date:20130524T000000Z

            host;range;x-amz-content-sha256;x-amz-date
            e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855
            """)
        #expect(get.stringToSign == """
            AWS4-HMAC-SHA256
            20130524T000000Z
            20130524/us-east-1/s3/aws4_request
            7344ae5b7ee6c3e7e6b0fe0640412a37625d1fbfff95c48bbb2dc43964946972
            """)
        #expect(get.signature == "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41")
        #expect(get.authorization == "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request, "
            + "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date, Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41")
        let lifecycle = signer.sign(Self.cases[1].request, credentials: Self.exampleKeys, time: Self.exampleTime)
        #expect(lifecycle.signature == "fea454ca298b7da1c68078a5d1bdbfbbe0d65c699e0f91ac7a200a0136783543")
        let list = signer.sign(Self.cases[2].request, credentials: Self.exampleKeys, time: Self.exampleTime)
        #expect(list.encodedQuery == "max-keys=2&prefix=J")
        #expect(list.signature == "34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7")
    }

    /// The secret and the token never appear in what a log line or an error could show.
    @Test func credentialsDescriptionHidesSecrets() {
        let keys = AWSCredentials(accessKeyID: "AKID", secretAccessKey: "s3cr3t-value", sessionToken: "t0ken-value", source: "environment")
        #expect(!"\(keys)".contains("s3cr3t-value") && !"\(keys)".contains("t0ken-value"))
        #expect("\(keys)".contains("AKID"))
    }

    @Test func encoding() {
        #expect(SigV4.encode("a b+c=d~e/f", keepSlash: true) == "a%20b%2Bc%3Dd~e/f")
        #expect(SigV4.encode("a/b", keepSlash: false) == "a%2Fb")
        #expect(SigV4.encode("é", keepSlash: false) == "%C3%A9")
        #expect(SigV4.timestamps(0).amzDate == "19700101T000000Z")
        #expect(SigV4.timestamps(1_764_201_600).day == "20251127")
    }
}
