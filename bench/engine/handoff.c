/* A machine's thread hand-over cost, beside the engine benchmark: two threads pass a token back
 * and forth through one mutex and two condition variables (what a hand-over between the
 * engine's scheduling loop and an attempt thread costs when neither finds the other by
 * spinning: a futex wake-up and a sleep each way). Prints round trips per second.
 *
 *   cc -O2 -pthread -o handoff handoff.c && ./handoff 20000
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t to_worker = PTHREAD_COND_INITIALIZER, to_loop = PTHREAD_COND_INITIALIZER;
static int turn;  /* 0: the loop's, 1: the worker's */
static long rounds;

static void *worker(void *unused) {
    (void)unused;
    for (long i = 0; i < rounds; i++) {
        pthread_mutex_lock(&lock);
        while (turn != 1) pthread_cond_wait(&to_worker, &lock);
        turn = 0;
        pthread_cond_signal(&to_loop);
        pthread_mutex_unlock(&lock);
    }
    return NULL;
}

int main(int argc, char **argv) {
    rounds = argc > 1 ? atol(argv[1]) : 20000;
    pthread_t thread;
    pthread_create(&thread, NULL, worker, NULL);
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (long i = 0; i < rounds; i++) {
        pthread_mutex_lock(&lock);
        turn = 1;
        pthread_cond_signal(&to_worker);
        while (turn != 0) pthread_cond_wait(&to_loop, &lock);
        pthread_mutex_unlock(&lock);
    }
    clock_gettime(CLOCK_MONOTONIC, &b);
    pthread_join(thread, NULL);
    printf("%.0f\n", rounds / ((b.tv_sec - a.tv_sec) + (b.tv_nsec - a.tv_nsec) / 1e9));
    return 0;
}
