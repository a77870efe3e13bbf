/* abi_major2.c — a plugin built for a future ABI 2.0: the host must refuse it by version. */
#include <orchestrate/plugin.h>

static int32_t run(const orc_step_call *call, const orc_host_api *api, orc_host *host) {
    (void)call; (void)api; (void)host;
    return ORC_RUN_OK;
}

static const orc_step_type step = {
    sizeof(orc_step_type), 0, "future.step", "1.0.0", "A step from the future.", NULL,
    "{\"type\":\"object\"}", NULL, run,
};
static const orc_step_type *const steps[] = {&step};
static const orc_plugin plugin = {
    sizeof(orc_plugin), 2, 0, 1, "future", "1.0.0", "Built for ABI 2.0.", steps,
};

ORC_EXPORT const orc_plugin *orchestrate_plugin_entry_v1(void) { return &plugin; }
