/* bad_descriptor.c — descriptions the host must refuse, one per BAD_VARIANT (pass
 * -DBAD_VARIANT=N to the compiler; without it, variant 1):
 *
 *   1  a step id that is NULL              6  a NULL pointer in step_types
 *   2  an input schema that is not JSON    7  a step with a NULL run function
 *   3  orc_plugin.struct_size too small    8  a step id that is not lower-case words
 *   4  a NULL plugin name                  9  orc_step_type.struct_size too small
 *   5  step_type_count above 1024         10  an output schema that is not JSON
 */
#include <orchestrate/plugin.h>

#ifndef BAD_VARIANT
#define BAD_VARIANT 1
#endif

static int32_t run(const orc_step_call *call, const orc_host_api *api, orc_host *host) {
    (void)call; (void)api; (void)host;
    return ORC_RUN_OK;
}

static const orc_step_type step = {
    BAD_VARIANT == 9 ? 8 : sizeof(orc_step_type),
    0,
    BAD_VARIANT == 1 ? NULL : BAD_VARIANT == 8 ? "Bad Step" : "bad.step",
    "1.0.0",
    "A step with a broken description.",
    NULL,
    BAD_VARIANT == 2 ? "{\"type\": \"object\"" : "{\"type\":\"object\"}",
    BAD_VARIANT == 10 ? "not json" : NULL,
    BAD_VARIANT == 7 ? NULL : run,
};
static const orc_step_type *const steps[] = {BAD_VARIANT == 6 ? NULL : &step};
static const orc_plugin plugin = {
    BAD_VARIANT == 3 ? 16 : sizeof(orc_plugin),
    ORC_ABI_VERSION_MAJOR,
    ORC_ABI_VERSION_MINOR,
    BAD_VARIANT == 5 ? 5000 : 1,
    BAD_VARIANT == 4 ? NULL : "bad",
    "1.0.0",
    "A plugin with a broken description.",
    steps,
};

ORC_EXPORT const orc_plugin *orchestrate_plugin_entry_v1(void) { return &plugin; }
