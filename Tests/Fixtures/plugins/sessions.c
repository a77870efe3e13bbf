/* Test plugin "sessions" (ABI 1.1 session steps), built by the engine tests with cc:
 *
 *   test.session-open  {log}: opens a process-local session, logs "open ID", outputs {"session": ID}
 *   test.session-use   {log, session, ms?}: fails (permanent) unless ID is open in this process;
 *                      logs "use ID", sleeps ms (cancellable)
 *   close_session      logs "close ID" and forgets it
 */
#include <orchestrate/plugin.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static char open_ids[64][64];
static int open_count = 0;
static int next_id = 1;

/* Finds "key":"value" in a flat JSON object; copies value. Enough for these tests. */
static int json_string(const char *json, const char *key, char *out, size_t size) {
    char pattern[128];
    snprintf(pattern, sizeof pattern, "\"%s\":\"", key);
    const char *p = strstr(json, pattern);
    if (!p) return 0;
    p += strlen(pattern);
    size_t n = 0;
    while (p[n] && p[n] != '"' && n + 1 < size) { out[n] = p[n]; n++; }
    out[n] = 0;
    return 1;
}

static long json_int(const char *json, const char *key, long fallback) {
    char pattern[128];
    snprintf(pattern, sizeof pattern, "\"%s\":", key);
    const char *p = strstr(json, pattern);
    long value;
    return p && sscanf(p + strlen(pattern), "%ld", &value) == 1 ? value : fallback;
}

static void log_line(const char *file, const char *verb, const char *id) {
    FILE *f = fopen(file, "a");
    if (!f) return;
    fprintf(f, "%s %s\n", verb, id);
    fclose(f);
}

static int32_t run_open(const orc_step_call *call, const orc_host_api *api, orc_host *host) {
    char file[1024], id[64], output[128];
    if (!json_string(call->inputs_json, "log", file, sizeof file)) {
        api->set_error(host, ORC_ERROR_INVALID_INPUT, "input", "log is required", -1);
        return ORC_RUN_FAILED;
    }
    pthread_mutex_lock(&lock);
    snprintf(id, sizeof id, "s%d-%d", (int)getpid(), next_id++);
    if (open_count < 64) strcpy(open_ids[open_count++], id);
    pthread_mutex_unlock(&lock);
    log_line(file, "open", id);
    snprintf(output, sizeof output, "\"%s\"", id);
    api->set_output(host, "session", output);
    return ORC_RUN_OK;
}

static int is_open(const char *id) {
    int found = 0;
    pthread_mutex_lock(&lock);
    for (int i = 0; i < open_count; i++) found |= strcmp(open_ids[i], id) == 0;
    pthread_mutex_unlock(&lock);
    return found;
}

static int32_t run_use(const orc_step_call *call, const orc_host_api *api, orc_host *host) {
    char file[1024], id[64];
    if (!json_string(call->inputs_json, "log", file, sizeof file) || !json_string(call->inputs_json, "session", id, sizeof id)) {
        api->set_error(host, ORC_ERROR_INVALID_INPUT, "input", "log and session are required", -1);
        return ORC_RUN_FAILED;
    }
    if (!is_open(id)) {
        api->set_error(host, ORC_ERROR_PERMANENT, "no_session", "the session is not open in this process", -1);
        return ORC_RUN_FAILED;
    }
    log_line(file, "use", id);
    if (api->sleep_ms(host, json_int(call->inputs_json, "ms", 0))) {
        api->set_error(host, ORC_ERROR_CANCELLED, "cancelled", "cancelled", -1);
        return ORC_RUN_FAILED;
    }
    return ORC_RUN_OK;
}

static void close_session(const char *step_type, const char *outputs_json) {
    char id[64];
    (void)step_type;
    if (!json_string(outputs_json, "session", id, sizeof id)) return;
    pthread_mutex_lock(&lock);
    for (int i = 0; i < open_count; i++) {
        if (strcmp(open_ids[i], id) == 0) {
            strcpy(open_ids[i], open_ids[--open_count]);
            break;
        }
    }
    pthread_mutex_unlock(&lock);
    /* The log file is not in the outputs: tests read it from the environment. */
    const char *file = getenv("SESSIONS_TEST_LOG");
    if (file) log_line(file, "close", id);
}

#define SCHEMA "{\"type\":\"object\"}"
static const orc_step_type open_step = {sizeof(orc_step_type), ORC_STEP_OPENS_SESSION, "test.session-open", "1.0.0",
                                        "Opens a process-local session.", NULL, SCHEMA, NULL, run_open, close_session};
static const orc_step_type use_step = {sizeof(orc_step_type), 0, "test.session-use", "1.0.0",
                                       "Uses a session; fails unless it is open here.", NULL, SCHEMA, NULL, run_use, NULL};
static const orc_step_type *const steps[] = {&open_step, &use_step};
static const orc_plugin plugin = {sizeof(orc_plugin), ORC_ABI_VERSION_MAJOR, ORC_ABI_VERSION_MINOR, 2,
                                  "sessions", "1.0.0", "Session steps for tests.", steps};

ORC_EXPORT const orc_plugin *orchestrate_plugin_entry_v1(void) { return &plugin; }
