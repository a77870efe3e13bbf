@testable import OrchestrateEngine
import OrchestrateJSON
import Testing

/// The host and port network awareness probes for a step (`Endpoint`): a port the inputs leave
/// out is the scheme's or the step type's default, never a guess.
@Suite struct EndpointTests {
    @Test func anFTPStepWithoutAPortIsProbedOnTwentyOneOrNineNinetyWithImplicitTLS() throws {
        let explicit = try #require(Endpoint(inputs: ["host": "files.example"], stepType: "ftp.upload"))
        #expect(explicit.port == 21)
        let implicit = try #require(Endpoint(inputs: ["host": "files.example", "tls": "implicit"], stepType: "ftp.download"))
        #expect(implicit.port == 990)
        let plain = try #require(Endpoint(inputs: ["host": "files.example", "tls": "none"], stepType: "ftp.upload"))
        #expect(plain.port == 21)
        let written = try #require(Endpoint(inputs: ["host": "files.example", "port": 2121, "tls": "implicit"], stepType: "ftp.upload"))
        #expect(written.port == 2121, "a written port wins")
    }

    @Test func aURLWithoutAPortTakesItsSchemesPort() throws {
        #expect(Endpoint(inputs: ["url": "ftp://files.example/in/x"])?.port == 21)
        #expect(Endpoint(inputs: ["url": "ftps://files.example/in/x"])?.port == 990)
        #expect(Endpoint(inputs: ["url": "http://api.example/x"])?.port == 80)
        #expect(Endpoint(inputs: ["url": "https://api.example/x"])?.port == 443)
        #expect(Endpoint(inputs: ["url": "gopher://api.example/x"]) == nil, "an unknown scheme's port is not guessed")
    }

    @Test func aHostWithoutAPortTakesTheSchemasDefaultElseIsNotProbed() throws {
        let schema: JSONValue = ["type": "object", "properties": ["port": ["type": "integer", "default": 22]]]
        #expect(Endpoint(inputs: ["host": "files.example"], stepType: "sftp.upload", inputSchema: schema)?.port == 22)
        #expect(Endpoint(inputs: ["host": "files.example"], stepType: "test.connect") == nil)
    }
}
