/* Test plugin "progress", built by the engine tests with cc:
 *
 *   test.progress  {bytes, ms, files?}: pretends to transfer `bytes` over `ms` milliseconds,
 *                  reporting progress 20 times a second (and per-file progress when files > 0).
 */
#include <orchestrate/plugin.h>
#include <stdio.h>
#include <string.h>

static long long json_int(const char *json, const char *key, long long fallback) {
    char pattern[128];
    snprintf(pattern, sizeof pattern, "\"%s\":", key);
    const char *p = strstr(json, pattern);
    long long value;
    return p && sscanf(p + strlen(pattern), "%lld", &value) == 1 ? value : fallback;
}

static int32_t run_progress(const orc_step_call *call, const orc_host_api *api, orc_host *host) {
    long long bytes = json_int(call->inputs_json, "bytes", 1 << 20);
    long long ms = json_int(call->inputs_json, "ms", 1000);
    long long ticks = ms / 50 > 0 ? ms / 50 : 1;
    for (long long i = 1; i <= ticks; i++) {
        if (api->sleep_ms(host, 50)) {
            api->set_error(host, ORC_ERROR_CANCELLED, "cancelled", "cancelled", -1);
            return ORC_RUN_FAILED;
        }
        api->progress(host, bytes * i / ticks, bytes, -1, -1);
    }
    api->set_output(host, "bytes", "0");
    return ORC_RUN_OK;
}

static const orc_step_type progress_step = {sizeof(orc_step_type), 0, "test.progress", "1.0.0",
                                            "Reports transfer progress for a while.", NULL, "{\"type\":\"object\"}", NULL,
                                            run_progress, NULL};
static const orc_step_type *const steps[] = {&progress_step};
static const orc_plugin plugin = {sizeof(orc_plugin), ORC_ABI_VERSION_MAJOR, ORC_ABI_VERSION_MINOR, 1,
                                  "progress", "1.0.0", "Progress for tests.", steps};

ORC_EXPORT const orc_plugin *orchestrate_plugin_entry_v1(void) { return &plugin; }
