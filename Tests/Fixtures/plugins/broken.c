/* Deliberately broken plugin "broken", for the isolation tests (built with cc):
 *
 *   broken.segfault  writes through a NULL pointer
 *   broken.abort     calls abort()
 *   broken.hang      sleeps forever, ignoring cancellation
 *   broken.leak      allocates and touches 16 MiB blocks until malloc fails, then crashes
 *
 * Run in process, each would take the engine down with it; with `isolation: process` each
 * fails only its step.
 */
#include <orchestrate/plugin.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int32_t run_segfault(const orc_step_call *call, const orc_host_api *api, orc_host *host) {
    (void)call;
    api->log(host, ORC_LOG_INFO, "about to crash");
    volatile int *nowhere = NULL;
    *nowhere = 42;
    return ORC_RUN_OK;
}

static int32_t run_abort(const orc_step_call *call, const orc_host_api *api, orc_host *host) {
    (void)call; (void)api; (void)host;
    abort();
}

static int32_t run_hang(const orc_step_call *call, const orc_host_api *api, orc_host *host) {
    (void)call;
    api->log(host, ORC_LOG_INFO, "hanging, deaf to cancellation");
    for (;;) sleep(1);
    return ORC_RUN_FAILED; /* not reached */
}

static int32_t run_leak(const orc_step_call *call, const orc_host_api *api, orc_host *host) {
    (void)call; (void)api; (void)host;
    for (;;) {
        char *block = malloc(16 << 20);
        if (!block) {
            volatile int *nowhere = NULL; /* like a plugin that never checks malloc */
            *nowhere = 1;
        }
        memset(block, 1, 16 << 20);
    }
    return ORC_RUN_FAILED; /* not reached */
}

#define STEP(var, step_id, fn) \
    static const orc_step_type var = {.struct_size = sizeof(orc_step_type), .id = step_id, .version = "1.0.0", \
                                      .summary = "Broken on purpose.", .input_schema = "{\"type\":\"object\"}", .run = fn}
STEP(segfault_step, "broken.segfault", run_segfault);
STEP(abort_step, "broken.abort", run_abort);
STEP(hang_step, "broken.hang", run_hang);
STEP(leak_step, "broken.leak", run_leak);
static const orc_step_type *const steps[] = {&segfault_step, &abort_step, &hang_step, &leak_step};
static const orc_plugin plugin = {.struct_size = sizeof(orc_plugin), .abi_major = ORC_ABI_VERSION_MAJOR,
                                  .abi_minor = ORC_ABI_VERSION_MINOR, .step_type_count = 4, .name = "broken",
                                  .version = "1.0.0", .summary = "Plugins that fail badly, for tests.", .step_types = steps};

ORC_EXPORT const orc_plugin *orchestrate_plugin_entry_v1(void) { return &plugin; }
