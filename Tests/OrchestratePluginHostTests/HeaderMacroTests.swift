// ORC_API_HAS / ORC_STRUCT_HAS from plugin.h, compiled by cc exactly as a plugin author would use
// them, against tables of the sizes an older host or extension would hand over.
import Foundation
import OrchestrateTestSupport
import Testing

@Suite struct HeaderMacroTests {
    @Test func apiHasAnswersFromTheOtherSidesStructSize() throws {
        let dir = TemporaryDirectory()
        let source = dir.write("api_has.c", """
            #include <orchestrate/plugin.h>
            #include <stdio.h>
            int main(void) {
                orc_host_api api = {0};
                orc_bandwidth_v1 bw = {0};
                /* A host whose table ends just before get_extension (a 1.0-sized table). */
                api.struct_size = (uint32_t)offsetof(orc_host_api, get_extension);
                printf("%d %d %d ", ORC_API_HAS(&api, log), ORC_API_HAS(&api, item_progress), ORC_API_HAS(&api, get_extension));
                /* One byte short of get_extension's pointer, then exactly covering it. */
                api.struct_size = (uint32_t)(offsetof(orc_host_api, get_extension) + sizeof(void *) - 1);
                printf("%d ", ORC_API_HAS(&api, get_extension));
                api.struct_size = (uint32_t)sizeof api;
                printf("%d ", ORC_API_HAS(&api, get_extension));
                bw.struct_size = (uint32_t)offsetof(orc_bandwidth_v1, consume);
                printf("%d ", ORC_STRUCT_HAS(orc_bandwidth_v1, &bw, consume));
                bw.struct_size = (uint32_t)sizeof bw;
                printf("%d\\n", ORC_STRUCT_HAS(orc_bandwidth_v1, &bw, consume));
                return 0;
            }
            """)
        let program = dir.file("api_has")
        let cc = ProcessInfo.processInfo.environment["CC"] ?? "/usr/bin/cc"
        let build = try ChildProcess.run(URL(fileURLWithPath: cc), ["-std=c99", "-Wall", "-Wextra", "-pedantic", "-Werror",
                                                                  "-I", TestPaths.abiInclude.path, "-o", program.path, source.path])
        #expect(build.status == 0, "\(build.stderr)")
        let run = try ChildProcess.run(program, [])
        #expect(run.stdout == "1 1 0 0 1 0 1\n")
    }
}
