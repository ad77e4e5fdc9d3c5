/* thread_pool.c — persistent workers woken per phase by a generation counter; the caller is thread 0 and
 * waits for the others on a condition variable. */
#include "thread_pool.h"

#include <stdlib.h>

typedef struct fp8moe_pool_worker {
  fp8moe_pool* pool;
  int32_t index;
  pthread_t thread;
} fp8moe_pool_worker;

struct fp8moe_pool {
  int32_t num_threads;
  pthread_mutex_t run_lock; /* held for a whole run by the backend */
  pthread_mutex_t lock;     /* guards everything below */
  pthread_cond_t wake;
  pthread_cond_t done;
  uint64_t generation; /* bumped once per phase */
  int32_t remaining;   /* workers still inside the current phase */
  int32_t stopping;
  fp8moe_pool_fn fn;
  void* arg;
  fp8moe_pool_worker* workers; /* num_threads − 1 */
};

static void* pool_worker_main(void* opaque) {
  fp8moe_pool_worker* w = (fp8moe_pool_worker*)opaque;
  fp8moe_pool* pool = w->pool;
  uint64_t seen = 0;
  pthread_mutex_lock(&pool->lock);
  for (;;) {
    while (pool->generation == seen && !pool->stopping) pthread_cond_wait(&pool->wake, &pool->lock);
    if (pool->stopping) break;
    seen = pool->generation;
    fp8moe_pool_fn fn = pool->fn;
    void* arg = pool->arg;
    pthread_mutex_unlock(&pool->lock);
    fn(arg, w->index, pool->num_threads);
    pthread_mutex_lock(&pool->lock);
    if (--pool->remaining == 0) pthread_cond_signal(&pool->done);
  }
  pthread_mutex_unlock(&pool->lock);
  return NULL;
}

/* Stops and joins the first `started` workers, then frees the pool. */
static void pool_teardown(fp8moe_pool* pool, int32_t started) {
  pthread_mutex_lock(&pool->lock);
  pool->stopping = 1;
  pthread_cond_broadcast(&pool->wake);
  pthread_mutex_unlock(&pool->lock);
  for (int32_t i = 0; i < started; ++i) pthread_join(pool->workers[i].thread, NULL);
  pthread_cond_destroy(&pool->done);
  pthread_cond_destroy(&pool->wake);
  pthread_mutex_destroy(&pool->lock);
  pthread_mutex_destroy(&pool->run_lock);
  free(pool->workers);
  free(pool);
}

int fp8moe_pool_create(int32_t num_threads, fp8moe_pool** out) {
  *out = NULL;
  if (num_threads < 1) num_threads = 1;
  fp8moe_pool* pool = (fp8moe_pool*)calloc(1, sizeof *pool);
  if (!pool) return -1;
  pool->num_threads = num_threads;
  pool->workers = (fp8moe_pool_worker*)calloc((size_t)num_threads, sizeof *pool->workers);
  if (!pool->workers) {
    free(pool);
    return -1;
  }
  int rc = pthread_mutex_init(&pool->run_lock, NULL);
  if (rc) goto fail_run_lock;
  rc = pthread_mutex_init(&pool->lock, NULL);
  if (rc) goto fail_lock;
  rc = pthread_cond_init(&pool->wake, NULL);
  if (rc) goto fail_wake;
  rc = pthread_cond_init(&pool->done, NULL);
  if (rc) goto fail_done;
  for (int32_t i = 1; i < num_threads; ++i) {
    fp8moe_pool_worker* w = &pool->workers[i - 1];
    w->pool = pool;
    w->index = i;
    rc = pthread_create(&w->thread, NULL, pool_worker_main, w);
    if (rc) {
      pool_teardown(pool, i - 1);
      return rc;
    }
  }
  *out = pool;
  return 0;

fail_done:
  pthread_cond_destroy(&pool->wake);
fail_wake:
  pthread_mutex_destroy(&pool->lock);
fail_lock:
  pthread_mutex_destroy(&pool->run_lock);
fail_run_lock:
  free(pool->workers);
  free(pool);
  return rc;
}

void fp8moe_pool_destroy(fp8moe_pool* pool) {
  if (pool) pool_teardown(pool, pool->num_threads - 1);
}

void fp8moe_pool_run(fp8moe_pool* pool, fp8moe_pool_fn fn, void* arg) {
  if (pool->num_threads > 1) {
    pthread_mutex_lock(&pool->lock);
    pool->fn = fn;
    pool->arg = arg;
    pool->remaining = pool->num_threads - 1;
    ++pool->generation;
    pthread_cond_broadcast(&pool->wake);
    pthread_mutex_unlock(&pool->lock);
  }
  fn(arg, 0, pool->num_threads);
  if (pool->num_threads > 1) {
    pthread_mutex_lock(&pool->lock);
    while (pool->remaining > 0) pthread_cond_wait(&pool->done, &pool->lock);
    pthread_mutex_unlock(&pool->lock);
  }
}

void fp8moe_pool_lock(fp8moe_pool* pool) {
  pthread_mutex_lock(&pool->run_lock);
}

void fp8moe_pool_unlock(fp8moe_pool* pool) {
  pthread_mutex_unlock(&pool->run_lock);
}
