/* test_struct_size_bytes.c — the struct_size rule at every byte (docs/ABI.md, "The struct_size rule"): a
 * field is read or written only when struct_size covers ALL of it. For every struct of the ABI and every
 * struct_size from 0 to sizeof + 64 — sizes that end inside a pointer, a size_t, an enum or a char array
 * included — the plugin must behave exactly as with struct_size rounded down to the last whole field:
 *   in-structs (moe_args, context_args): same status, same outputs, same message as the rounded call, while
 *     the fields past the rounded size hold values that change the result (or crash) when read;
 *   out-structs (negotiation, context_info, backend_info, capabilities): the whole fields inside are those of
 *     a full-size call, and no byte from the rounded size on (up to sizeof + 64) is written.
 * Each moe_args call runs in a child process so that a crash (the half-pointer case) is reported per size. */
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS */
#define _POSIX_C_SOURCE 200809L

#include <dlfcn.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "baseline_problem.h"
#include "fp8moe.h"
#include "plugin_host.h"

#define POISON 0xA5
#define SLACK 64
#define END_OF(type, field) (offsetof(type, field) + sizeof(((type*)0)->field))
#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

static const fp8moe_api* api;
static test_plugin plugin;

/* ---- the field lists, written from fp8moe.h independently of the library's ---- */

static const size_t negotiation_ends[] = {
    END_OF(fp8moe_negotiation, struct_size),      END_OF(fp8moe_negotiation, host_abi_major),
    END_OF(fp8moe_negotiation, host_min_minor),   END_OF(fp8moe_negotiation, host_max_minor),
    END_OF(fp8moe_negotiation, plugin_abi_major), END_OF(fp8moe_negotiation, plugin_abi_minor),
    END_OF(fp8moe_negotiation, agreed_minor),     END_OF(fp8moe_negotiation, refusal),
    END_OF(fp8moe_negotiation, message)};
static const size_t context_args_ends[] = {
    END_OF(fp8moe_context_args, struct_size),        END_OF(fp8moe_context_args, error_message),
    END_OF(fp8moe_context_args, error_message_size), END_OF(fp8moe_context_args, backend),
    END_OF(fp8moe_context_args, device_ordinal),     END_OF(fp8moe_context_args, num_threads),
    END_OF(fp8moe_context_args, flags)};
static const size_t context_info_ends[] = {
    END_OF(fp8moe_context_info, struct_size),        END_OF(fp8moe_context_info, backend),
    END_OF(fp8moe_context_info, device_ordinal),     END_OF(fp8moe_context_info, num_threads),
    END_OF(fp8moe_context_info, graph_capturable),   END_OF(fp8moe_context_info, sm_count),
    END_OF(fp8moe_context_info, compute_capability), END_OF(fp8moe_context_info, device_name)};
static const size_t backend_info_ends[] = {
    END_OF(fp8moe_backend_info, struct_size), END_OF(fp8moe_backend_info, backend),
    END_OF(fp8moe_backend_info, available),   END_OF(fp8moe_backend_info, device_count),
    END_OF(fp8moe_backend_info, compiled_in), END_OF(fp8moe_backend_info, name),
    END_OF(fp8moe_backend_info, device_name), END_OF(fp8moe_backend_info, reason)};
static const size_t capabilities_ends[] = {
    END_OF(fp8moe_capabilities, struct_size),        END_OF(fp8moe_capabilities, backend),
    END_OF(fp8moe_capabilities, flags),              END_OF(fp8moe_capabilities, routing_method_count),
    END_OF(fp8moe_capabilities, quant_format_count), END_OF(fp8moe_capabilities, activation_count),
    END_OF(fp8moe_capabilities, argument_count),     END_OF(fp8moe_capabilities, routing_methods),
    END_OF(fp8moe_capabilities, quant_formats),      END_OF(fp8moe_capabilities, activations),
    END_OF(fp8moe_capabilities, arguments),          END_OF(fp8moe_capabilities, limits)};
static const size_t moe_args_ends[] = {
    END_OF(fp8moe_moe_args, struct_size),         END_OF(fp8moe_moe_args, error_message),
    END_OF(fp8moe_moe_args, error_message_size),  END_OF(fp8moe_moe_args, routing_method),
    END_OF(fp8moe_moe_args, quant_format),        END_OF(fp8moe_moe_args, activation),
    END_OF(fp8moe_moe_args, gate_up_order),       END_OF(fp8moe_moe_args, flags),
    END_OF(fp8moe_moe_args, num_experts),         END_OF(fp8moe_moe_args, top_k),
    END_OF(fp8moe_moe_args, local_expert_offset), END_OF(fp8moe_moe_args, local_num_experts),
    END_OF(fp8moe_moe_args, n_group),             END_OF(fp8moe_moe_args, topk_group),
    END_OF(fp8moe_moe_args, routed_scaling_factor), END_OF(fp8moe_moe_args, hidden_states),
    END_OF(fp8moe_moe_args, hidden_scale),        END_OF(fp8moe_moe_args, router_logits),
    END_OF(fp8moe_moe_args, routing_bias),        END_OF(fp8moe_moe_args, topk_ids),
    END_OF(fp8moe_moe_args, topk_weights),        END_OF(fp8moe_moe_args, w13),
    END_OF(fp8moe_moe_args, w13_scale),           END_OF(fp8moe_moe_args, w2),
    END_OF(fp8moe_moe_args, w2_scale),            END_OF(fp8moe_moe_args, a1_scale),
    END_OF(fp8moe_moe_args, a2_scale),            END_OF(fp8moe_moe_args, output),
    END_OF(fp8moe_moe_args, routing_ids_out),     END_OF(fp8moe_moe_args, routing_weights_out),
    END_OF(fp8moe_moe_args, device_status),       END_OF(fp8moe_moe_args, workspace),
    END_OF(fp8moe_moe_args, workspace_size),      END_OF(fp8moe_moe_args, stream)};

/* struct_size rounded down to the end of the last whole field. */
static size_t whole(const size_t* ends, size_t n, size_t s) {
  size_t c = 0;
  for (size_t i = 0; i < n && ends[i] <= s; ++i) c = ends[i];
  return c;
}

static int bytes_are(const void* p, size_t n, unsigned char v) {
  const unsigned char* b = p;
  for (size_t i = 0; i < n; ++i)
    if (b[i] != v) return 0;
  return 1;
}

/* ---- out-structs ---- */

/* A struct of `size` bytes followed by SLACK bytes, all POISON, with struct_size = s. */
typedef union out_buf {
  max_align_t align;
  unsigned char bytes[640];
} out_buf;

static void out_init(out_buf* b, size_t s) {
  memset(b, POISON, sizeof *b);
  memcpy(b->bytes, &s, sizeof s);
}

/* Bytes [in_end, c) equal the full call's, struct_size kept, and [max(c, in_end), size + SLACK) untouched. */
static void check_out(const char* what, size_t s, const out_buf* b, const unsigned char* full, size_t in_end,
                      size_t c, size_t size) {
  size_t kept;
  memcpy(&kept, b->bytes, sizeof kept);
  EXPECT(kept == s, "%s struct_size %zu: struct_size overwritten with %zu", what, s, kept);
  if (c > in_end)
    EXPECT(memcmp(b->bytes + in_end, full + in_end, c - in_end) == 0,
           "%s struct_size %zu: the whole fields up to %zu differ from a full-size call", what, s, c);
  size_t start = c > in_end ? c : in_end;
  EXPECT(bytes_are(b->bytes + start, size + SLACK - start, POISON),
         "%s struct_size %zu: bytes from %zu on written (only whole fields up to %zu may be)", what, s, start, c);
}

static void check_negotiation(void) {
  const size_t size = sizeof(fp8moe_negotiation);
  const size_t in_end = END_OF(fp8moe_negotiation, host_max_minor);
  fp8moe_get_api_fn get_api = (fp8moe_get_api_fn)(uintptr_t)dlsym(plugin.handle, "fp8moe_get_api");
  for (int refused = 0; refused < 2; ++refused) {
    out_buf full;
    out_init(&full, size);
    fp8moe_negotiation* n = (fp8moe_negotiation*)full.bytes;
    n->host_abi_major = refused ? 2 : FP8MOE_ABI_VERSION_MAJOR;
    n->host_min_minor = 0;
    n->host_max_minor = FP8MOE_ABI_VERSION_MINOR;
    const fp8moe_api* t = NULL;
    int32_t full_st = get_api(n, &t);
    EXPECT(full_st == (refused ? FP8MOE_STATUS_ABI_MISMATCH : FP8MOE_STATUS_OK), "negotiation full: %d", full_st);
    for (size_t s = 0; s <= size + SLACK; ++s) {
      out_buf b;
      out_init(&b, s);
      n = (fp8moe_negotiation*)b.bytes;
      n->host_abi_major = refused ? 2 : FP8MOE_ABI_VERSION_MAJOR;
      n->host_min_minor = 0;
      n->host_max_minor = FP8MOE_ABI_VERSION_MINOR;
      const size_t c = whole(negotiation_ends, COUNT(negotiation_ends), s);
      t = (const fp8moe_api*)(uintptr_t)0x1;
      int32_t st = get_api(n, &t);
      const int too_small = c < END_OF(fp8moe_negotiation, refusal);
      int32_t want = too_small ? FP8MOE_STATUS_INVALID_ARGUMENT : full_st;
      EXPECT(st == want, "negotiation%s struct_size %zu: status %d, expected %d", refused ? " (major 2)" : "", s,
             st, want);
      EXPECT((st == FP8MOE_STATUS_OK) == (t != NULL), "negotiation struct_size %zu: *api %p with status %d", s,
             (const void*)t, st);
      if (too_small) {
        /* refused for its size: the covered out-fields may say so, nothing past them is written */
        size_t start = c > in_end ? c : in_end;
        EXPECT(bytes_are(b.bytes + start, size + SLACK - start, POISON),
               "negotiation struct_size %zu: bytes from %zu on written", s, start);
      } else {
        check_out(refused ? "negotiation (major 2)" : "negotiation", s, &b, full.bytes, in_end, c, size);
      }
    }
  }
}

static void check_context_info(fp8moe_context* ctx) {
  const size_t size = sizeof(fp8moe_context_info);
  out_buf full;
  out_init(&full, size);
  EXPECT(api->context_info(ctx, (fp8moe_context_info*)full.bytes) == FP8MOE_STATUS_OK, "context_info full");
  for (size_t s = 0; s <= size + SLACK; ++s) {
    out_buf b;
    out_init(&b, s);
    const size_t c = whole(context_info_ends, COUNT(context_info_ends), s);
    int32_t st = api->context_info(ctx, (fp8moe_context_info*)b.bytes);
    int32_t want = c >= END_OF(fp8moe_context_info, backend) ? FP8MOE_STATUS_OK : FP8MOE_STATUS_INVALID_ARGUMENT;
    EXPECT(st == want, "context_info struct_size %zu: status %d, expected %d", s, st, want);
    check_out("context_info", s, &b, full.bytes, sizeof(size_t), st == FP8MOE_STATUS_OK ? c : 0, size);
  }
}

static void check_backend_info(void) {
  const size_t size = sizeof(fp8moe_backend_info);
  const size_t in_end = END_OF(fp8moe_backend_info, backend);
  const int32_t backends[] = {FP8MOE_BACKEND_CPU, FP8MOE_BACKEND_CUDA};
  for (size_t i = 0; i < COUNT(backends); ++i) {
    out_buf full;
    out_init(&full, size);
    ((fp8moe_backend_info*)full.bytes)->backend = backends[i];
    EXPECT(api->backend_info((fp8moe_backend_info*)full.bytes) == FP8MOE_STATUS_OK, "backend_info full");
    for (size_t s = 0; s <= size + SLACK; ++s) {
      out_buf b;
      out_init(&b, s);
      ((fp8moe_backend_info*)b.bytes)->backend = backends[i];
      const size_t c = whole(backend_info_ends, COUNT(backend_info_ends), s);
      int32_t st = api->backend_info((fp8moe_backend_info*)b.bytes);
      int32_t want = c >= in_end ? FP8MOE_STATUS_OK : FP8MOE_STATUS_INVALID_ARGUMENT;
      EXPECT(st == want, "backend_info(%d) struct_size %zu: status %d, expected %d", backends[i], s, st, want);
      check_out("backend_info", s, &b, full.bytes, in_end, st == FP8MOE_STATUS_OK ? c : 0, size);
    }
  }
}

static void check_capabilities(fp8moe_context* ctx) {
  const size_t size = sizeof(fp8moe_capabilities);
  fp8moe_context* contexts[] = {NULL, ctx};
  for (size_t i = 0; i < COUNT(contexts); ++i) {
    out_buf full;
    out_init(&full, size);
    EXPECT(api->query_capabilities(contexts[i], (fp8moe_capabilities*)full.bytes) == FP8MOE_STATUS_OK,
           "query_capabilities full");
    for (size_t s = 0; s <= size + SLACK; ++s) {
      out_buf b;
      out_init(&b, s);
      const size_t c = whole(capabilities_ends, COUNT(capabilities_ends), s);
      int32_t st = api->query_capabilities(contexts[i], (fp8moe_capabilities*)b.bytes);
      int32_t want = c >= END_OF(fp8moe_capabilities, flags) ? FP8MOE_STATUS_OK : FP8MOE_STATUS_INVALID_ARGUMENT;
      EXPECT(st == want, "query_capabilities struct_size %zu: status %d, expected %d", s, st, want);
      check_out("capabilities", s, &b, full.bytes, sizeof(size_t), st == FP8MOE_STATUS_OK ? c : 0, size);
    }
  }
}

/* ---- context_args: every field past the whole ones holds a value that changes the outcome when read ---- */

typedef struct create_outcome {
  int32_t status;
  int32_t backend, num_threads;
  char message[256];
} create_outcome;

static create_outcome create_with(size_t struct_size) {
  create_outcome o;
  memset(&o, 0, sizeof o);
  fp8moe_context_args a;
  memset(&a, 0, sizeof a);
  a.struct_size = struct_size;
  memset(o.message, POISON, sizeof o.message);
  o.message[sizeof o.message - 1] = '\0';
  a.error_message = o.message;
  a.error_message_size = sizeof o.message;
  a.backend = 0x0163; /* one byte reads 0x63 (99), refused; whole: refused */
  a.device_ordinal = -1;
  a.num_threads = 0x7ffffffb; /* low bytes give 251 threads */
  a.flags = 0x100;            /* the low byte is 0: only a whole read sees it */
  fp8moe_context* c = NULL;
  o.status = api->context_create(&a, &c);
  if (c) {
    fp8moe_context_info ci;
    memset(&ci, 0, sizeof ci);
    ci.struct_size = sizeof ci;
    api->context_info(c, &ci);
    o.backend = ci.backend;
    o.num_threads = ci.num_threads;
    api->context_destroy(c);
  }
  return o;
}

static void check_context_args(void) {
  for (size_t s = 0; s <= sizeof(fp8moe_context_args) + SLACK; ++s) {
    const size_t c = whole(context_args_ends, COUNT(context_args_ends), s);
    create_outcome got = create_with(s), want = create_with(c);
    EXPECT(got.status == want.status && got.backend == want.backend && got.num_threads == want.num_threads,
           "context_args struct_size %zu: status %d backend %d threads %d; with %zu (whole fields): %d %d %d", s,
           got.status, got.backend, got.num_threads, c, want.status, want.backend, want.num_threads);
    if (c >= sizeof(size_t))
      EXPECT(strcmp(got.message, want.message) == 0, "context_args struct_size %zu: message '%.80s', with %zu '%.80s'",
             s, got.message, c, want.message);
  }
}

/* ---- moe_args: a real problem; each call in a child ---- */

static unsigned char* arena;
static size_t arena_used;
#define ARENA_BYTES (4u << 20)

static void* arena_data(const baseline_problem* p, int32_t arg, fp8moe_dtype dt, int64_t n) {
  (void)p;
  size_t bytes = (size_t)(n > 0 ? n : 1) * (dt.bits / 8u);
  void* d = arena + arena_used;
  arena_used += (bytes + 255) / 256 * 256;
  uint32_t x = 12345u + (uint32_t)arg * 7919u;
  for (int64_t i = 0; i < n; ++i) {
    x = x * 1664525u + 1013904223u;
    float f = (float)(x >> 8) / 16777216.0f; /* [0,1) */
    if (dt.code == FP8MOE_DTYPE_FLOAT8_E4M3FN) ((unsigned char*)d)[i] = (unsigned char)((x >> 24) & 0xB7);
    else if (dt.code == FP8MOE_DTYPE_FLOAT && dt.bits == 32) ((float*)d)[i] = arg == FP8MOE_ARG_ROUTER_LOGITS ? 4 * f - 2 : 0.01f + 0.01f * f;
    else if (dt.code == FP8MOE_DTYPE_BFLOAT) {
      float v = 2 * f - 1;
      uint32_t u;
      memcpy(&u, &v, 4);
      ((uint16_t*)d)[i] = (uint16_t)(u >> 16);
    } else memset((char*)d + i * (dt.bits / 8), 0, dt.bits / 8);
  }
  return d;
}

typedef struct run_outcome {
  int32_t crashed; /* the signal that ended the child, or 0 */
  int32_t status, ws_status;
  size_t ws_bytes;
  unsigned char output[4 * 256 * 2];
  int32_t ids[8], device_status;
  float weights[8];
  char message[512];
} run_outcome;

static baseline_problem problem;
static void* workspace;
static size_t workspace_need;

static void run_child(size_t struct_size, run_outcome* o) {
  fp8moe_context* ctx = NULL;
  if (baseline_cpu_context(api, 1, &ctx) != FP8MOE_STATUS_OK) _exit(2);
  fp8moe_moe_args a = problem.args;
  a.struct_size = struct_size;
  a.error_message = o->message;
  a.error_message_size = sizeof o->message;
  a.workspace = workspace;
  a.workspace_size = SIZE_MAX; /* any partial read is nonzero, but only a whole read has room */
  a.stream = (void*)(uintptr_t)0x11;
  memset(problem.t[FP8MOE_ARG_OUTPUT].t.data, POISON, sizeof o->output);
  memset(problem.t[FP8MOE_ARG_ROUTING_IDS_OUT].t.data, POISON, sizeof o->ids);
  memset(problem.t[FP8MOE_ARG_ROUTING_WEIGHTS_OUT].t.data, POISON, sizeof o->weights);
  memset(problem.t[FP8MOE_ARG_DEVICE_STATUS].t.data, POISON, sizeof o->device_status);
  o->ws_status = api->query_workspace(ctx, &a, &o->ws_bytes);
  o->status = api->run(ctx, &a);
  memcpy(o->output, problem.t[FP8MOE_ARG_OUTPUT].t.data, sizeof o->output);
  memcpy(o->ids, problem.t[FP8MOE_ARG_ROUTING_IDS_OUT].t.data, sizeof o->ids);
  memcpy(o->weights, problem.t[FP8MOE_ARG_ROUTING_WEIGHTS_OUT].t.data, sizeof o->weights);
  memcpy(&o->device_status, problem.t[FP8MOE_ARG_DEVICE_STATUS].t.data, sizeof o->device_status);
  api->context_destroy(ctx);
}

static void run_isolated(size_t struct_size, run_outcome* shared) {
  memset(shared, 0, sizeof *shared);
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    run_child(struct_size, shared);
    _exit(0); /* no atexit handlers (leak checks) in the child */
  }
  int wst = 0;
  if (pid < 0 || waitpid(pid, &wst, 0) != pid) {
    shared->crashed = -1;
    return;
  }
  if (WIFSIGNALED(wst)) shared->crashed = WTERMSIG(wst);
  else if (WEXITSTATUS(wst) != 0) shared->crashed = -WEXITSTATUS(wst);
}

static void check_moe_args(void) {
  baseline_config cfg = baseline_config_default();
  baseline_build(&problem, &cfg, arena_data);
  fp8moe_context* ctx = NULL;
  EXPECT(baseline_cpu_context(api, 1, &ctx) == FP8MOE_STATUS_OK, "CPU context");
  EXPECT(api->query_workspace(ctx, &problem.args, &workspace_need) == FP8MOE_STATUS_OK, "query_workspace: %s",
         problem.message);
  api->context_destroy(ctx);
  workspace = baseline_workspace(workspace_need, NULL);
  run_outcome* got = mmap(NULL, 2 * sizeof(run_outcome), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (got == MAP_FAILED || !workspace) {
    EXPECT(0, "mmap/workspace failed");
    return;
  }
  run_outcome* want = got + 1;
  run_isolated(sizeof(fp8moe_moe_args), want);
  EXPECT(want->crashed == 0 && want->status == FP8MOE_STATUS_OK, "full-size run: crashed %d status %d: %s",
         want->crashed, want->status, want->message);
  int failed_sizes = 0;
  for (size_t s = 0; s <= sizeof(fp8moe_moe_args) + SLACK; ++s) {
    const size_t c = whole(moe_args_ends, COUNT(moe_args_ends), s);
    run_isolated(s, got);
    run_isolated(c, want);
    int same = got->crashed == 0 && want->crashed == 0 && got->status == want->status &&
               got->ws_status == want->ws_status && got->ws_bytes == want->ws_bytes &&
               memcmp(got->output, want->output, sizeof got->output) == 0 &&
               memcmp(got->ids, want->ids, sizeof got->ids) == 0 &&
               memcmp(got->weights, want->weights, sizeof got->weights) == 0 &&
               got->device_status == want->device_status;
    /* messages quote struct_size itself when it is too small; otherwise they must agree */
    if (c >= END_OF(fp8moe_moe_args, output)) same = same && strcmp(got->message, want->message) == 0;
    failed_sizes += !same;
    EXPECT(same, "moe_args struct_size %zu: crashed %d status %d/%d '%.100s'; with %zu (whole fields): crashed %d "
           "status %d/%d '%.100s'", s, got->crashed, got->status, got->ws_status, got->message, c, want->crashed,
           want->status, want->ws_status, want->message);
  }
  printf("moe_args: %zu sizes, %d differ from the whole-field call\n", sizeof(fp8moe_moe_args) + SLACK + 1,
         failed_sizes);
  munmap(got, 2 * sizeof(run_outcome));
}

int main(void) {
  if (test_plugin_open(NULL, &plugin) != 0) return 1;
  api = plugin.api;
  arena = baseline_alloc256(ARENA_BYTES);
  if (!arena) return 1;
  fp8moe_context* ctx = NULL;
  EXPECT(baseline_cpu_context(api, 1, &ctx) == FP8MOE_STATUS_OK, "CPU context");
  /* one line per struct: how many of its checks failed (the first failures are printed above) */
#define SECTION(name, call)                                                   \
  do {                                                                        \
    int before_ = test_failures;                                              \
    call;                                                                     \
    printf("%s: %d failed checks\n", name, test_failures - before_);         \
  } while (0)
  SECTION("negotiation", check_negotiation());
  SECTION("context_args", check_context_args());
  SECTION("backend_info", check_backend_info());
  if (ctx) {
    SECTION("context_info", check_context_info(ctx));
    SECTION("capabilities", check_capabilities(ctx));
    api->context_destroy(ctx);
  }
  SECTION("moe_args", check_moe_args());
  free(workspace);
  free(arena);
  test_plugin_close(&plugin);
  return test_finish("test_struct_size_bytes", test_checks_run);
}
