/*
 * hostprobe.c — the "probe" plugin: steps that poke at the host's side of the ABI, for the
 * plugin host's own tests (teststeps.c is the engine's; this one checks edge cases).
 *
 *   probe.rc7          returns 7 (neither OK nor FAILED) without set_error.
 *   probe.ok_after_error  calls set_error, then returns OK anyway (the step still succeeds).
 *   probe.outputs      set_output with invalid JSON (reports the return code as `bad_rc`), a
 *                      replaced output `replaced`, a NULL name (`null_name_rc`).
 *   probe.checkpoint   reports the checkpoint it got (`loaded`, string or null), saves "one",
 *                      loads it back (`reloaded`), tries a 2 MiB checkpoint (`big_rc`), and
 *                      reports the table (`api_size`, `abi_major`, `extension_is_null`).
 *   probe.cancel_fd    blocks in poll() on cancel_fd (up to 10 s); outputs `woke` = 1 when it
 *                      became readable, and `is_cancelled`; returns OK either way (finishing
 *                      after a cancel is a success).
 *   probe.permanent_on_cancel / probe.retryable_on_cancel
 *                      sleep until cancelled (up to 10 s), then fail with that kind.
 *   probe.log          logs "first\nsecond\r\nthird\n" at WARN and one line at level 9.
 *   probe.late         starts a thread that calls back 300 ms after run returned (a contract
 *                      violation the host must survive), and returns OK at once.
 *   probe.threads      four threads log 200 lines each and report progress; joins them.
 *   probe.linger       starts a thread of its own that keeps working after run returned (it
 *                      never calls the host), registers an exit handler that aborts if that
 *                      thread is still at work when it runs, and returns OK. The handler plays
 *                      a library's exit handler (OpenSSL's OPENSSL_cleanup) freeing what a
 *                      live thread uses: the process must end without running it.
 *   probe.item         takes one item: outputs `id`, `json` and `checkpoint` (a string), then
 *                      item_progress(5, 10), save_item_checkpoint("ck") (`save_rc`) and
 *                      item_done(ok = 0, "boom").
 *   probe.thread       outputs the name of the thread that called run (`name`, a string) and
 *                      its kernel id (`tid`): which host thread runs an attempt.
 */
#define _GNU_SOURCE /* pthread_getname_np, gettid */
#include <orchestrate/plugin.h>

#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static void sleep_ms_plain(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static void output_int(const orc_host_api *api, orc_host *host, const char *name, long long value) {
    char text[32];
    snprintf(text, sizeof text, "%lld", value);
    api->set_output(host, name, text);
}

/* Outputs `len` bytes as a JSON string (the bytes are plain ASCII in these tests). */
static void output_bytes(const orc_host_api *api, orc_host *host, const char *name, const uint8_t *bytes,
                         size_t len) {
    char text[256];
    if (!bytes) { api->set_output(host, name, "null"); return; }
    if (len > sizeof text - 3) len = sizeof text - 3;
    text[0] = '"';
    memcpy(text + 1, bytes, len);
    text[len + 1] = '"';
    text[len + 2] = '\0';
    api->set_output(host, name, text);
}

static int32_t run_rc7(const orc_step_call *call, const orc_host_api *api, orc_host *host) {
    (void)call; (void)api; (void)host;
    return 7;
}

static int32_t run_ok_after_error(const orc_step_call *call, const orc_host_api *api, orc_host *host) {
    (void)call;
    api->set_error(host, ORC_ERROR_PERMANENT, "ignored", "reported but then succeeded", -1);
    api->set_output(host, "done", "true");
    return ORC_RUN_OK;
}

static int32_t run_outputs(const orc_step_call *call, const orc_host_api *api, orc_host *host) {
    (void)call;
    output_int(api, host, "bad_rc", api->set_output(host, "bad", "{not json"));
    api->set_output(host, "replaced", "1");
    api->set_output(host, "replaced", "{\"b\":[1,2.5,\"x\"]}");
    output_int(api, host, "null_name_rc", api->set_output(host, NULL, "1"));
    return ORC_RUN_OK;
}

static int32_t run_checkpoint(const orc_step_call *call, const orc_host_api *api, orc_host *host) {
    (void)call;
    size_t size = 0;
    const uint8_t *loaded = api->load_checkpoint(host, &size);
    output_bytes(api, host, "loaded", loaded, size);
    output_int(api, host, "save_rc", api->save_checkpoint(host, (const uint8_t *)"one", 3));
    loaded = api->load_checkpoint(host, &size);
    output_bytes(api, host, "reloaded", loaded, size);
    size_t big_size = 2u << 20;
    uint8_t *big = calloc(1, big_size);
    output_int(api, host, "big_rc", big ? api->save_checkpoint(host, big, big_size) : -2);
    free(big);
    loaded = api->load_checkpoint(host, &size);
    output_bytes(api, host, "after_big", loaded, size);
    output_int(api, host, "api_size", api->struct_size);
    output_int(api, host, "abi_major", api->abi_major);
    output_int(api, host, "extension_is_null", api->get_extension(host, "orchestrate.nothing.v1") == NULL);
    return ORC_RUN_OK;
}

static int32_t run_cancel_fd(const orc_step_call *call, const orc_host_api *api, orc_host *host) {
    (void)call;
    struct pollfd pfd = {api->cancel_fd(host), POLLIN, 0};
    int ready = poll(&pfd, 1, 10000);
    output_int(api, host, "woke", ready == 1 && (pfd.revents & POLLIN));
    output_int(api, host, "is_cancelled", api->is_cancelled(host));
    return ORC_RUN_OK;
}

static int32_t fail_on_cancel(const orc_host_api *api, orc_host *host, int32_t kind) {
    if (!api->sleep_ms(host, 10000)) return ORC_RUN_OK;
    api->set_error(host, kind, "stopped", "stopped after cancel", 2500);
    return ORC_RUN_FAILED;
}

static int32_t run_permanent_on_cancel(const orc_step_call *call, const orc_host_api *api, orc_host *host) {
    (void)call;
    return fail_on_cancel(api, host, ORC_ERROR_PERMANENT);
}

static int32_t run_retryable_on_cancel(const orc_step_call *call, const orc_host_api *api, orc_host *host) {
    (void)call;
    return fail_on_cancel(api, host, ORC_ERROR_RETRYABLE);
}

static int32_t run_log(const orc_step_call *call, const orc_host_api *api, orc_host *host) {
    (void)call;
    api->log(host, ORC_LOG_WARN, "first\nsecond\r\nthird\n");
    api->log(host, 9, "level nine");
    api->log(host, ORC_LOG_INFO, NULL);
    return ORC_RUN_OK;
}

struct late_args {
    const orc_host_api *api;
    orc_host *host;
};

static void *late_thread(void *arg) {
    struct late_args args = *(struct late_args *)arg;
    free(arg);
    sleep_ms_plain(300);
    args.api->log(args.host, ORC_LOG_ERROR, "this line comes after run returned");
    args.api->progress(args.host, 1, 2, -1, -1);
    args.api->set_output(args.host, "late", "1");
    args.api->is_cancelled(args.host);
    size_t size;
    args.api->load_checkpoint(args.host, &size);
    args.api->save_checkpoint(args.host, (const uint8_t *)"late", 4);
    args.api->set_error(args.host, ORC_ERROR_PERMANENT, "late", "late", -1);
    return NULL;
}

static int32_t run_late(const orc_step_call *call, const orc_host_api *api, orc_host *host) {
    (void)call;
    pthread_t thread;
    struct late_args *args = malloc(sizeof *args);
    if (!args) return ORC_RUN_FAILED;
    args->api = api;
    args->host = host;
    if (pthread_create(&thread, NULL, late_thread, args) != 0) { free(args); return ORC_RUN_FAILED; }
    pthread_detach(thread);
    return ORC_RUN_OK;
}

static void *chatty_thread(void *arg) {
    struct late_args *args = arg;
    char line[64];
    for (int i = 0; i < 200; i++) {
        snprintf(line, sizeof line, "line %d", i);
        args->api->log(args->host, ORC_LOG_INFO, line);
        args->api->progress(args->host, i, 200, -1, -1);
    }
    return NULL;
}

static int32_t run_threads(const orc_step_call *call, const orc_host_api *api, orc_host *host) {
    (void)call;
    pthread_t threads[4];
    struct late_args args = {api, host};
    for (int i = 0; i < 4; i++) pthread_create(&threads[i], NULL, chatty_thread, &args);
    for (int i = 0; i < 4; i++) pthread_join(threads[i], NULL);
    return ORC_RUN_OK;
}

static volatile int lingering;

static void *linger_thread(void *arg) {
    (void)arg;
    lingering = 1;
    for (;;) sleep_ms_plain(5);
    return NULL;
}

static void abort_if_lingering(void) {
    if (lingering) abort();
}

static pthread_once_t linger_once = PTHREAD_ONCE_INIT;

static void start_lingering(void) {
    pthread_t thread;
    atexit(abort_if_lingering);
    if (pthread_create(&thread, NULL, linger_thread, NULL) == 0) pthread_detach(thread);
}

static int32_t run_linger(const orc_step_call *call, const orc_host_api *api, orc_host *host) {
    (void)call; (void)api; (void)host;
    pthread_once(&linger_once, start_lingering);
    while (!lingering) sleep_ms_plain(1);
    return ORC_RUN_OK;
}

static int32_t run_item(const orc_step_call *call, const orc_host_api *api, orc_host *host) {
    (void)call;
    orc_item item;
    memset(&item, 0, sizeof item);
    item.struct_size = sizeof item;
    int32_t got;
    while ((got = api->next_item(host, 100, &item)) == ORC_ITEM_TIMEOUT) {
        if (api->is_cancelled(host)) return ORC_RUN_FAILED;
    }
    if (got == ORC_ITEM_CLOSED) {
        api->set_output(host, "closed", "true");
        return ORC_RUN_OK;
    }
    output_bytes(api, host, "id", (const uint8_t *)item.id, strlen(item.id));
    api->set_output(host, "json", item.json);
    output_bytes(api, host, "checkpoint", item.checkpoint, item.checkpoint_size);
    api->item_progress(host, item.id, 5, 10);
    output_int(api, host, "save_rc", api->save_item_checkpoint(host, item.id, (const uint8_t *)"ck", 2));
    api->item_done(host, item.id, 0, "boom");
    return ORC_RUN_OK;
}

static int32_t run_thread(const orc_step_call *call, const orc_host_api *api, orc_host *host) {
    (void)call;
    char name[64] = "";
    pthread_getname_np(pthread_self(), name, sizeof name);
    output_bytes(api, host, "name", (const uint8_t *)name, strlen(name));
    output_int(api, host, "tid", (long long)gettid());
    return ORC_RUN_OK;
}

#define STEP(name, ident, flags, fn)                                                            \
    static const orc_step_type name = {                                                         \
        sizeof(orc_step_type), flags, ident, "1.0.0", "Host probe.", NULL, "{\"type\":\"object\"}", \
        NULL, fn                                                                                \
    }

STEP(rc7, "probe.rc7", 0, run_rc7);
STEP(ok_after_error, "probe.ok_after_error", 0, run_ok_after_error);
STEP(outputs, "probe.outputs", 0, run_outputs);
STEP(checkpoint, "probe.checkpoint", 0, run_checkpoint);
STEP(cancel_fd, "probe.cancel_fd", 0, run_cancel_fd);
STEP(permanent_on_cancel, "probe.permanent_on_cancel", 0, run_permanent_on_cancel);
STEP(retryable_on_cancel, "probe.retryable_on_cancel", 0, run_retryable_on_cancel);
STEP(log_step, "probe.log", 0, run_log);
STEP(late, "probe.late", 0, run_late);
STEP(threads, "probe.threads", 0, run_threads);
STEP(item, "probe.item", ORC_STEP_ACCEPTS_ITEMS, run_item);
STEP(linger, "probe.linger", 0, run_linger);
STEP(thread, "probe.thread", 0, run_thread);

static const orc_step_type *const steps[] = {
    &rc7, &ok_after_error, &outputs, &checkpoint, &cancel_fd, &permanent_on_cancel, &retryable_on_cancel, &log_step, &late, &threads, &item,
    &linger, &thread,
};
static const orc_plugin plugin = {
    sizeof(orc_plugin), ORC_ABI_VERSION_MAJOR, ORC_ABI_VERSION_MINOR, sizeof steps / sizeof steps[0],
    "probe", "1.0.0", "Edge cases of the host side of the ABI.", steps,
};

ORC_EXPORT const orc_plugin *orchestrate_plugin_entry_v1(void) { return &plugin; }
