import Foundation
import OrchestrateJSON
import OrchestrateTestSupport
import Testing

/// An `s3://` URL (and a step without `endpoint`) goes where the AWS SDKs would send it:
/// `AWS_ENDPOINT_URL_S3`, `AWS_ENDPOINT_URL`, the profile's `endpoint_url`. Against `rclone
/// serve s3` (every signature checked). `https_proxy` points at a closed loopback port, so a
/// request that went to AWS instead would fail here, not leave the machine.
@Suite struct ConfiguredEndpointTests {
    static func runner(_ environment: [String: String]) -> S3Runner {
        let runner = S3Runner()
        runner.environment["https_proxy"] = "http://127.0.0.1:9"
        runner.environment["HTTPS_PROXY"] = "http://127.0.0.1:9"
        for (name, value) in environment { runner.environment[name] = value }
        return runner
    }

    @Test(arguments: ["AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"]) func anS3URLGoesToTheEnvironmentsEndpoint(variable: String) throws {
        let peer = try S3Peer(.rclone)
        try peer.makeBucket("media")
        let runner = Self.runner([variable: peer.endpoint])
        let source = runner.path("movie.bin")
        try Tools.randomFile(source, bytes: 300_001)
        let up = try runner.orchestrate(["copy", source, "s3://media/in/movie.bin", "--json"])
        #expect(up.status == 0, "\(TransferTests.check(up))")
        let fetched = runner.path("fetched.bin")
        #expect(try peer.aws(["s3api", "get-object", "--bucket", "media", "--key", "in/movie.bin", fetched]).status == 0)
        #expect(Tools.sameBytes(fetched, source))
        let logs = S3Runner.events(up.stdout).ofType("step.log").compactMap { $0["data"]?["message"]?.stringValue }
        #expect(logs.contains("endpoint \(peer.endpoint) (from \(variable))"), "\(logs)")
    }

    @Test func aStepAndAnS3URLUseTheProfilesEndpointURL() throws {
        let peer = try S3Peer(.rclone)
        try peer.makeBucket("media")
        let runner = Self.runner([:])
        let config = runner.path("aws-config")
        try "[profile edit]\nregion = us-east-1\nendpoint_url = \(peer.endpoint)\n".write(toFile: config, atomically: true, encoding: .utf8)
        runner.environment["AWS_CONFIG_FILE"] = config
        runner.environment["AWS_PROFILE"] = "edit"
        let source = runner.path("movie.bin")
        try Tools.randomFile(source, bytes: 200_003)
        let file = runner.workflow("""
            version: 1
            name: s3-profile-endpoint
            steps:
              up:
                uses: s3.upload
                with: { bucket: media, key: a/movie.bin, source: "\(source)" }
            """)
        let up = try runner.run(file)
        #expect(up.status == 0, "\(TransferTests.check(up))")
        let back = runner.path("back.bin")
        let down = try runner.orchestrate(["copy", "s3://media/a/movie.bin", back, "--json"])
        #expect(down.status == 0, "\(TransferTests.check(down))")
        #expect(Tools.sameBytes(back, source))
    }

    /// The step's own `endpoint` wins over the environment's.
    @Test func theStepsEndpointWins() throws {
        let peer = try S3Peer(.rclone)
        try peer.makeBucket("media")
        let runner = Self.runner(["AWS_ENDPOINT_URL_S3": "http://127.0.0.1:9"])
        let source = runner.path("a.bin")
        try Tools.randomFile(source, bytes: 1000)
        let file = runner.workflow("""
            version: 1
            name: s3-step-endpoint
            steps:
              up:
                uses: s3.upload
                with: { endpoint: "\(peer.endpoint)", bucket: media, key: a.bin, source: "\(source)" }
            """)
        let up = try runner.run(file)
        #expect(up.status == 0, "\(TransferTests.check(up))")
    }
}
