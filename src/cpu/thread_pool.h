/* thread_pool.h — a persistent pool of worker threads for the CPU backend. The pool is created with the
 * context and joined when it is destroyed, so run never creates threads. The calling thread takes part as
 * thread 0; a pool of n threads starts n − 1 workers. */
#ifndef FP8MOE_CPU_THREAD_POOL_H
#define FP8MOE_CPU_THREAD_POOL_H

#include <pthread.h>
#include <stdint.h>

/* One phase of work: called once on every thread with its index in [0, num_threads). */
typedef void (*fp8moe_pool_fn)(void* arg, int32_t thread_index, int32_t num_threads);

typedef struct fp8moe_pool fp8moe_pool;

/* Starts num_threads − 1 workers. Returns 0, or the errno of the failed pthread call (nothing is left
 * running or allocated then). */
int fp8moe_pool_create(int32_t num_threads, fp8moe_pool** pool);
/* Stops and joins every worker. No phase may be in flight. NULL is a no-op. */
void fp8moe_pool_destroy(fp8moe_pool* pool);

/* Runs fn on every thread and returns when all have finished. Callers hold the pool's run lock. */
void fp8moe_pool_run(fp8moe_pool* pool, fp8moe_pool_fn fn, void* arg);

/* Serializes whole multi-phase runs of concurrent callers (each run owns the pool and the workspace
 * layout for its duration). */
void fp8moe_pool_lock(fp8moe_pool* pool);
void fp8moe_pool_unlock(fp8moe_pool* pool);

/* [begin, end) of n items for thread i of count threads: contiguous, fixed by (n, i, count) only. */
static inline void fp8moe_pool_split(int64_t n, int32_t i, int32_t count, int64_t* begin, int64_t* end) {
  *begin = n * i / count;
  *end = n * (i + 1) / count;
}

#endif /* FP8MOE_CPU_THREAD_POOL_H */
