/* abi_minor_new.c — a plugin built for ABI 1.ABI_MINOR: 1.99 by default, newer than the host and
 * refused by version; built with -DABI_MINOR=0 or 1, an older minor that a newer host loads. */
#include <orchestrate/plugin.h>

#ifndef ABI_MINOR
#define ABI_MINOR 99
#endif

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
    sizeof(orc_plugin), ORC_ABI_VERSION_MAJOR, ABI_MINOR, 1, "future", "1.0.0", "Built for ABI 1.99.", steps,
};

ORC_EXPORT const orc_plugin *orchestrate_plugin_entry_v1(void) { return &plugin; }
