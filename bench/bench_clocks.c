/* bench_clocks.c — the SM clock, what lowers it and the board's energy counter, read through NVML while timed runs
 * execute, so every time in a report stands beside the clock it ran at (docs/PERFORMANCE.md "Protocol": the large-T
 * layer runs at the board's power cap). NVML is dlopened, as cuBLASLt is: without the driver's libnvidia-ml the bench
 * still runs and reports the clocks as not sampled. One thread samples between bench_clocks_start and
 * bench_clocks_stop; the timing thread only opens and closes the window, so sampling adds no work to its stream. */
#define _POSIX_C_SOURCE 200809L
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_gpu.h"

#define MAX_SAMPLES 65536       /* a minute at the period below; a longer window keeps its first minute */
#define PERIOD_NS 1000000L      /* 1 ms between readings */
#define NVML_CLOCK_SM 1         /* nvmlClockType_t */

typedef struct nvml_device_st* nvml_device; /* nvmlDevice_t */
typedef int (*nvml_u64_fn)(nvml_device, unsigned long long*);
typedef int (*nvml_by_bus_fn)(const char*, nvml_device*);

struct bench_clocks {
  void* so;
  int (*shutdown)(void);
  int (*clock_info)(nvml_device, int, unsigned*);
  nvml_u64_fn reasons; /* NULL: not offered */
  nvml_u64_fn energy;  /* NULL: not offered */
  nvml_device dev;
  pthread_t thread;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int state;        /* 0 idle, 1 sampling, 2 quit */
  unsigned window;  /* bumped at every start and stop: a reading begun in another window is dropped */
  double t0_ms;
  int n;
  bench_clock_sample s[MAX_SAMPLES];
};

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e3 + (double)t.tv_nsec * 1e-6;
}

static bench_clock_sample read_sample(const bench_clocks* c) {
  bench_clock_sample x = {now_ms(), 0, -1, -1};
  unsigned long long v = 0;
  if (c->clock_info(c->dev, NVML_CLOCK_SM, &x.sm_mhz) != 0) x.sm_mhz = 0;
  if (c->reasons && c->reasons(c->dev, &v) == 0) x.reasons = (long long)(v & 0x7fffffffffffffffull);
  if (c->energy && c->energy(c->dev, &v) == 0) x.energy_mj = (long long)(v & 0x7fffffffffffffffull);
  return x;
}

static void* sample_loop(void* arg) {
  bench_clocks* c = arg;
  const struct timespec period = {0, PERIOD_NS};
  pthread_mutex_lock(&c->mu);
  for (;;) {
    while (c->state == 0) pthread_cond_wait(&c->cv, &c->mu);
    if (c->state == 2) break;
    const unsigned window = c->window;
    pthread_mutex_unlock(&c->mu);
    const bench_clock_sample x = read_sample(c);
    pthread_mutex_lock(&c->mu);
    if (c->state == 1 && c->window == window && x.sm_mhz > 0 && c->n < MAX_SAMPLES) c->s[c->n++] = x;
    pthread_mutex_unlock(&c->mu);
    nanosleep(&period, NULL);
    pthread_mutex_lock(&c->mu);
  }
  pthread_mutex_unlock(&c->mu);
  return NULL;
}

static void* sym(void* so, const char* name) { return dlsym(so, name); }

bench_clocks* bench_clocks_open(int cuda_device, char* note, size_t note_size) {
  char bus[32];
  if (cudaDeviceGetPCIBusId(bus, (int)sizeof bus, cuda_device) != cudaSuccess) {
    snprintf(note, note_size, "clocks not sampled: no PCI bus id for CUDA device %d", cuda_device);
    return NULL;
  }
  void* so = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!so) {
    snprintf(note, note_size, "clocks not sampled: libnvidia-ml.so.1 not found");
    return NULL;
  }
  int (*init)(void) = (int (*)(void))sym(so, "nvmlInit_v2");
  nvml_by_bus_fn by_bus = (nvml_by_bus_fn)sym(so, "nvmlDeviceGetHandleByPciBusId_v2");
  bench_clocks* c = calloc(1, sizeof *c);
  if (!c || !init || !by_bus) {
    snprintf(note, note_size, "clocks not sampled: %s", c ? "NVML lacks nvmlInit_v2 or the bus-id lookup" : "memory");
    free(c);
    dlclose(so);
    return NULL;
  }
  c->so = so;
  c->shutdown = (int (*)(void))sym(so, "nvmlShutdown");
  c->clock_info = (int (*)(nvml_device, int, unsigned*))sym(so, "nvmlDeviceGetClockInfo");
  c->reasons = (nvml_u64_fn)sym(so, "nvmlDeviceGetCurrentClocksEventReasons");
  if (!c->reasons) c->reasons = (nvml_u64_fn)sym(so, "nvmlDeviceGetCurrentClocksThrottleReasons"); /* older drivers */
  c->energy = (nvml_u64_fn)sym(so, "nvmlDeviceGetTotalEnergyConsumption");
  unsigned mhz = 0;
  unsigned long long v = 0;
  const int initialized = init() == 0;
  if (!initialized || !c->clock_info || by_bus(bus, &c->dev) != 0 || c->clock_info(c->dev, NVML_CLOCK_SM, &mhz) != 0) {
    snprintf(note, note_size, "clocks not sampled: NVML %s for %s",
             initialized ? "cannot read the SM clock" : "init failed", bus);
    if (initialized && c->shutdown) c->shutdown();
    dlclose(so);
    free(c);
    return NULL;
  }
  if (c->reasons && c->reasons(c->dev, &v) != 0) c->reasons = NULL;
  if (c->energy && c->energy(c->dev, &v) != 0) c->energy = NULL;
  const int mu = pthread_mutex_init(&c->mu, NULL) == 0, cv = mu && pthread_cond_init(&c->cv, NULL) == 0;
  if (!cv || pthread_create(&c->thread, NULL, sample_loop, c) != 0) {
    snprintf(note, note_size, "clocks not sampled: no sampling thread");
    if (cv) pthread_cond_destroy(&c->cv);
    if (mu) pthread_mutex_destroy(&c->mu);
    if (c->shutdown) c->shutdown();
    dlclose(so);
    free(c);
    return NULL;
  }
  snprintf(note, note_size, "NVML every %ld ms while the timed runs execute: SM clock%s%s", PERIOD_NS / 1000000L,
           c->reasons ? ", clock event reasons" : "", c->energy ? ", board energy counter" : " (no energy counter)");
  return c;
}

void bench_clocks_close(bench_clocks* c) {
  if (!c) return;
  pthread_mutex_lock(&c->mu);
  c->state = 2;
  pthread_cond_signal(&c->cv);
  pthread_mutex_unlock(&c->mu);
  pthread_join(c->thread, NULL);
  pthread_cond_destroy(&c->cv);
  pthread_mutex_destroy(&c->mu);
  if (c->shutdown) c->shutdown();
  dlclose(c->so);
  free(c);
}

void bench_clocks_start(bench_clocks* c) {
  if (!c) return;
  pthread_mutex_lock(&c->mu);
  c->n = 0;
  ++c->window;
  c->state = 1;
  c->t0_ms = now_ms();
  pthread_cond_signal(&c->cv);
  pthread_mutex_unlock(&c->mu);
}

void bench_clocks_stop(bench_clocks* c, bench_clock_summary* out) {
  if (!c) {
    bench_clock_none(out);
    return;
  }
  pthread_mutex_lock(&c->mu);
  c->state = 0;
  ++c->window;
  const double window_ms = now_ms() - c->t0_ms;
  bench_clock_summarize(c->s, c->n, window_ms, out); /* the thread writes no sample while idle */
  pthread_mutex_unlock(&c->mu);
}
