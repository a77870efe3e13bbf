/* dup_step.c — plugin "dup" declaring test.noop, which teststeps.c already provides: the
 * registry keeps the first plugin found and refuses this one, naming both files. */
#include <orchestrate/plugin.h>

static int32_t run(const orc_step_call *call, const orc_host_api *api, orc_host *host) {
    (void)call; (void)api; (void)host;
    return ORC_RUN_OK;
}

static const orc_step_type noop = {
    sizeof(orc_step_type), 0, "test.noop", "2.0.0", "Another test.noop.", NULL,
    "{\"type\":\"object\"}", NULL, run,
};
static const orc_step_type own = {
    sizeof(orc_step_type), 0, "dup.own", "1.0.0", "A step only dup has.", NULL,
    "{\"type\":\"object\"}", NULL, run,
};
static const orc_step_type *const steps[] = {&own, &noop};
static const orc_plugin plugin = {
    sizeof(orc_plugin), ORC_ABI_VERSION_MAJOR, ORC_ABI_VERSION_MINOR, 2,
    "dup", "1.0.0", "Declares a step id another plugin has.", steps,
};

ORC_EXPORT const orc_plugin *orchestrate_plugin_entry_v1(void) { return &plugin; }
