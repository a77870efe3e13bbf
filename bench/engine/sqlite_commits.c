/* The baseline for the engine benchmark: how many write transactions per second raw SQLite
 * commits in WAL mode on this machine, with the same settings as orchestrate's store
 * (journal_mode=WAL, synchronous=NORMAL by default, FULL with ORCHESTRATE_SYNC=full).
 * Each transaction writes one small row, as the cheapest possible journal entry.
 *
 *   cc -O2 -o sqlite_commits sqlite_commits.c -lsqlite3 && ./sqlite_commits DIR 10000
 */
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void check(int rc, sqlite3 *db, const char *what) {
    if (rc != SQLITE_OK && rc != SQLITE_DONE && rc != SQLITE_ROW) {
        fprintf(stderr, "%s: %s\n", what, sqlite3_errmsg(db));
        exit(1);
    }
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s DIR COUNT\n", argv[0]);
        return 2;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/baseline.sqlite", argv[1]);
    int count = atoi(argv[2]);
    const char *sync = getenv("ORCHESTRATE_SYNC") && strcmp(getenv("ORCHESTRATE_SYNC"), "full") == 0 ? "FULL" : "NORMAL";
    sqlite3 *db;
    check(sqlite3_open(path, &db), db, "open");
    char pragma[64];
    snprintf(pragma, sizeof pragma, "PRAGMA synchronous=%s", sync);
    check(sqlite3_exec(db, "PRAGMA journal_mode=WAL", 0, 0, 0), db, "wal");
    check(sqlite3_exec(db, pragma, 0, 0, 0), db, "sync");
    check(sqlite3_exec(db, "CREATE TABLE IF NOT EXISTS t (id INTEGER PRIMARY KEY, v TEXT)", 0, 0, 0), db, "create");
    sqlite3_stmt *insert;
    check(sqlite3_prepare_v2(db, "INSERT INTO t (v) VALUES ('step finished')", -1, &insert, 0), db, "prepare");
    double start = now();
    for (int i = 0; i < count; i++) {
        check(sqlite3_exec(db, "BEGIN IMMEDIATE", 0, 0, 0), db, "begin");
        check(sqlite3_step(insert), db, "insert");
        sqlite3_reset(insert);
        check(sqlite3_exec(db, "COMMIT", 0, 0, 0), db, "commit");
    }
    double elapsed = now() - start;
    printf("%.0f\n", count / elapsed);
    sqlite3_finalize(insert);
    sqlite3_close(db);
    return 0;
}
