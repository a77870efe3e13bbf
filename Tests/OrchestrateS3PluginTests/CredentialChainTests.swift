import OrchestrateS3Auth
import Testing

/// The order credentials and the region are looked for, with the shared files given in memory.
@Suite struct CredentialChainTests {
    static let credentialsFile = """
        # keys
        [default]
        aws_access_key_id = AKIDDEFAULT
        aws_secret_access_key = default-secret

        [dev]
        aws_access_key_id=AKIDDEV
        aws_secret_access_key = dev/secret+x=
        aws_session_token = dev-token
        """
    static let configFile = """
        [default]
        region = eu-west-1
        [profile dev]
        region = ap-south-1
        s3 =
          addressing_style = path
        [profile sso]
        sso_start_url = https://example.invalid/start
        [profile halfway]
        aws_access_key_id = AKIDHALF
        """

    func chain(_ env: [String: String], files: Bool = true) -> CredentialChain {
        var env = env
        env["HOME"] = "/home/u"
        return CredentialChain(environment: env) { path in
            guard files else { return nil }
            switch path {
            case "/home/u/.aws/credentials": return Self.credentialsFile
            case "/home/u/.aws/config": return Self.configFile
            default: return nil
            }
        }
    }

    @Test func stepInputsComeFirst() throws {
        let (keys, region) = try chain(["AWS_ACCESS_KEY_ID": "AKIDENV", "AWS_SECRET_ACCESS_KEY": "env"])
            .resolve(.init(accessKeyID: "AKIDIN", secretAccessKey: "in-secret", sessionToken: "tok", region: "us-west-2"))
        #expect(keys == AWSCredentials(accessKeyID: "AKIDIN", secretAccessKey: "in-secret", sessionToken: "tok", source: "the step's inputs"))
        #expect(region == "us-west-2")
    }

    @Test func environmentBeforeFiles() throws {
        let (keys, region) = try chain(["AWS_ACCESS_KEY_ID": "AKIDENV", "AWS_SECRET_ACCESS_KEY": "env", "AWS_SESSION_TOKEN": "t",
                                        "AWS_DEFAULT_REGION": "ca-central-1"]).resolve(.init())
        #expect(keys.accessKeyID == "AKIDENV" && keys.secretAccessKey == "env" && keys.sessionToken == "t")
        #expect(region == "ca-central-1")
    }

    @Test func awsProfileReadsBothFiles() throws {
        let (keys, region) = try chain(["AWS_PROFILE": "dev"]).resolve(.init())
        #expect(keys.accessKeyID == "AKIDDEV" && keys.secretAccessKey == "dev/secret+x=" && keys.sessionToken == "dev-token")
        #expect(region == "ap-south-1")
        #expect(keys.source == "profile dev")
    }

    @Test func defaultProfileAndRegionOrder() throws {
        let (keys, region) = try chain([:]).resolve(.init())
        #expect(keys.accessKeyID == "AKIDDEFAULT" && region == "eu-west-1")
        #expect(try chain(["AWS_REGION": "sa-east-1", "AWS_DEFAULT_REGION": "x"]).resolve(.init()).region == "sa-east-1")
        // The profile input wins over the environment's keys.
        let explicit = try chain(["AWS_ACCESS_KEY_ID": "AKIDENV", "AWS_SECRET_ACCESS_KEY": "env"]).resolve(.init(profile: "dev"))
        #expect(explicit.credentials.accessKeyID == "AKIDDEV")
    }

    @Test func failuresSayWhatToDo() {
        func message(_ env: [String: String], _ explicit: CredentialChain.Explicit = .init(), files: Bool = true) -> String {
            do { _ = try chain(env, files: files).resolve(explicit); return "" } catch { return error.description }
        }
        #expect(message([:], files: false).contains("set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"))
        #expect(message(["AWS_PROFILE": "nope"]).contains("profile nope is in neither /home/u/.aws/credentials nor /home/u/.aws/config"))
        #expect(message(["AWS_PROFILE": "sso"]).contains("sso_start_url, which the s3 plugin does not support yet"))
        #expect(message(["AWS_PROFILE": "halfway"]).contains("no aws_secret_access_key"))
        #expect(message(["AWS_ACCESS_KEY_ID": "A"]).contains("AWS_SECRET_ACCESS_KEY is not"))
        #expect(message([:], .init(accessKeyID: "A")).contains("go together"))
        // No failure repeats a secret.
        #expect(!message(["AWS_PROFILE": "halfway"]).contains("default-secret"))
    }

    static let endpointConfig = """
        [default]
        endpoint_url = http://127.0.0.1:9001
        [profile dev]
        services = local
        endpoint_url = http://127.0.0.1:9002
        s3 =
          addressing_style = path
        [services local]
        sqs =
          endpoint_url = http://127.0.0.1:9999
        s3 =
          endpoint_url = http://127.0.0.1:9003
        [profile plain]
        region = eu-west-1
        """

    func endpointChain(_ env: [String: String]) -> CredentialChain {
        var env = env
        env["HOME"] = "/home/u"
        return CredentialChain(environment: env) { $0 == "/home/u/.aws/config" ? Self.endpointConfig : nil }
    }

    /// The endpoint a step without `endpoint` uses, in the AWS SDKs' order.
    @Test func endpointOrder() {
        let both = ["AWS_ENDPOINT_URL_S3": "http://127.0.0.1:1", "AWS_ENDPOINT_URL": "http://127.0.0.1:2"]
        #expect(endpointChain(both).endpoint(profile: nil)?.url == "http://127.0.0.1:1")
        #expect(endpointChain(both).endpoint(profile: nil)?.source == "AWS_ENDPOINT_URL_S3")
        #expect(endpointChain(["AWS_ENDPOINT_URL": "http://127.0.0.1:2"]).endpoint(profile: "dev")?.url == "http://127.0.0.1:2")
        // The services section's s3 block, over the profile's own endpoint_url.
        #expect(endpointChain([:]).endpoint(profile: "dev")?.url == "http://127.0.0.1:9003")
        #expect(endpointChain(["AWS_PROFILE": "dev"]).endpoint(profile: nil)?.url == "http://127.0.0.1:9003")
        #expect(endpointChain([:]).endpoint(profile: nil)?.url == "http://127.0.0.1:9001")
        #expect(endpointChain([:]).endpoint(profile: nil)?.source == "profile default of /home/u/.aws/config")
        #expect(endpointChain([:]).endpoint(profile: "plain") == nil)
        #expect(endpointChain(["AWS_IGNORE_CONFIGURED_ENDPOINT_URLS": "true", "AWS_ENDPOINT_URL_S3": "http://127.0.0.1:1"]).endpoint(profile: nil) == nil)
        #expect(endpointChain(["AWS_IGNORE_CONFIGURED_ENDPOINT_URLS": "true"]).endpoint(profile: "dev") == nil)
        // No config file, no variable: AWS.
        #expect(chain([:], files: false).endpoint(profile: nil) == nil)
    }
}
